package server

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

func gatherFamilies(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func familyValue(f *dto.MetricFamily) float64 {
	m := f.GetMetric()[0]
	if f.GetType() == dto.MetricType_COUNTER {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// replayctl's process collector exports what client_golang's does (the
// same families, help, types and, for what does not move between two
// reads, values), so dashboards and alerts on process_* keep working.
func TestProcessCollectorMatchesClientGolang(t *testing.T) {
	ours := gatherFamilies(t, newProcessCollector())
	if _, ok := newProcessCollector().(*processCollector); !ok {
		t.Fatal("newProcessCollector fell back to client_golang's on Linux")
	}
	theirs := gatherFamilies(t, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if len(ours) != len(theirs) || len(ours) != 9 {
		t.Fatalf("families: ours %d, client_golang %d (want 9 each)", len(ours), len(theirs))
	}
	for name, want := range theirs {
		got, ok := ours[name]
		if !ok {
			t.Errorf("%s: missing", name)
			continue
		}
		if got.GetHelp() != want.GetHelp() || got.GetType() != want.GetType() || len(got.GetMetric()) != 1 || len(got.GetMetric()[0].GetLabel()) != 0 {
			t.Errorf("%s: help %q type %v, want %q %v, one unlabelled series", name, got.GetHelp(), got.GetType(), want.GetHelp(), want.GetType())
			continue
		}
		g, w := familyValue(got), familyValue(want)
		switch name {
		case "process_start_time_seconds", "process_max_fds", "process_virtual_memory_max_bytes":
			if g != w {
				t.Errorf("%s = %v, client_golang %v", name, g, w)
			}
		case "process_open_fds":
			if math.Abs(g-w) > 8 {
				t.Errorf("%s = %v, client_golang %v", name, g, w)
			}
		default: // moving values: read at a different instant
			if g < 0 || (w > 0 && (g < w/2 || g > w*2+1e6)) {
				t.Errorf("%s = %v, client_golang %v", name, g, w)
			}
		}
	}
}
