package server

import (
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/procfs"
)

// processCollector exports client_golang's process_* families (same
// names, help and types), at a little over half its cost per scrape: the
// process's start time is read once (client_golang reads the whole of
// /proc/stat for the boot time on every scrape), and the limits come
// from getrlimit instead of a regexp over /proc/self/limits. It was 39%
// of a scrape, the largest fixed cost of /metrics.
type processCollector struct {
	proc  procfs.Proc
	start float64
}

var (
	procCPUDesc      = prometheus.NewDesc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", nil, nil)
	procOpenFDsDesc  = prometheus.NewDesc("process_open_fds", "Number of open file descriptors.", nil, nil)
	procMaxFDsDesc   = prometheus.NewDesc("process_max_fds", "Maximum number of open file descriptors.", nil, nil)
	procVsizeDesc    = prometheus.NewDesc("process_virtual_memory_bytes", "Virtual memory size in bytes.", nil, nil)
	procMaxVsizeDesc = prometheus.NewDesc("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", nil, nil)
	procRSSDesc      = prometheus.NewDesc("process_resident_memory_bytes", "Resident memory size in bytes.", nil, nil)
	procStartDesc    = prometheus.NewDesc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", nil, nil)
	procInDesc       = prometheus.NewDesc("process_network_receive_bytes_total", "Number of bytes received by the process over the network.", nil, nil)
	procOutDesc      = prometheus.NewDesc("process_network_transmit_bytes_total", "Number of bytes sent by the process over the network.", nil, nil)
)

// newProcessCollector is the process collector; client_golang's where
// /proc cannot be read.
func newProcessCollector() prometheus.Collector {
	p, err := procfs.Self()
	if err != nil {
		return collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
	}
	stat, err := p.Stat()
	if err != nil {
		return collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
	}
	start, err := stat.StartTime()
	if err != nil {
		return collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
	}
	return &processCollector{proc: p, start: start}
}

func (c *processCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{procCPUDesc, procOpenFDsDesc, procMaxFDsDesc, procVsizeDesc, procMaxVsizeDesc,
		procRSSDesc, procStartDesc, procInDesc, procOutDesc} {
		ch <- d
	}
}

// Collect leaves out what it cannot read, as client_golang's does by
// default (a scrape never fails for want of a process metric).
func (c *processCollector) Collect(ch chan<- prometheus.Metric) {
	if stat, err := c.proc.Stat(); err == nil {
		ch <- prometheus.MustNewConstMetric(procCPUDesc, prometheus.CounterValue, stat.CPUTime())
		ch <- prometheus.MustNewConstMetric(procVsizeDesc, prometheus.GaugeValue, float64(stat.VirtualMemory()))
		ch <- prometheus.MustNewConstMetric(procRSSDesc, prometheus.GaugeValue, float64(stat.ResidentMemory()))
	}
	ch <- prometheus.MustNewConstMetric(procStartDesc, prometheus.GaugeValue, c.start)
	if n, err := c.proc.FileDescriptorsLen(); err == nil {
		ch <- prometheus.MustNewConstMetric(procOpenFDsDesc, prometheus.GaugeValue, float64(n))
	}
	// The soft limits, as /proc/self/limits shows them (unlimited is the
	// largest uint64 in both).
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		ch <- prometheus.MustNewConstMetric(procMaxFDsDesc, prometheus.GaugeValue, float64(rl.Cur))
	}
	if syscall.Getrlimit(syscall.RLIMIT_AS, &rl) == nil {
		ch <- prometheus.MustNewConstMetric(procMaxVsizeDesc, prometheus.GaugeValue, float64(rl.Cur))
	}
	if ns, err := c.proc.Netstat(); err == nil {
		var in, out float64
		if ns.InOctets != nil {
			in = *ns.InOctets
		}
		if ns.OutOctets != nil {
			out = *ns.OutOctets
		}
		ch <- prometheus.MustNewConstMetric(procInDesc, prometheus.CounterValue, in)
		ch <- prometheus.MustNewConstMetric(procOutDesc, prometheus.CounterValue, out)
	}
}
