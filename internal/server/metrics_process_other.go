//go:build !linux

package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// newProcessCollector is client_golang's process collector off Linux.
func newProcessCollector() prometheus.Collector {
	return collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
}
