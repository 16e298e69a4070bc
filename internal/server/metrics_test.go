package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The build_info metric carries the build's identity as labels, value 1, so
// that dashboards can show which version each instance runs.
func TestMetricsCarryBuildInfo(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	resp, err := http.Get(b.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^replayctl_build_info\{bbolt="[^"]+",commit="[^"]+",goversion="go[^"]+",opa="[^"]+",version="[^"]+"\} 1$`)
	if !re.Match(data) {
		t.Fatalf("no replayctl_build_info line with every label in:\n%s", data)
	}
}

func scrape(t *testing.T, b *apiBundle) string {
	t.Helper()
	resp, err := http.Get(b.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

// An entry held for approval is decided the same on every run; it is one
// denial, not one per run (the README's denial-rate alert fired forever).
func TestDenialsCountedOncePerDecisionChange(t *testing.T) {
	b := newAPIBundle(t, []string{line("h1", "timeout", `,"labels":{"risk":"high"}`), line("e1", "timeout", "")})
	for range 3 {
		b.reconcile("operator")
	}
	m := scrape(t, b)
	for _, want := range []string{
		"replayctl_replays_denied_total 1\n",
		"replayctl_replays_proposed_total 2\n",
		"replayctl_config_valid 1\n",
		"replayctl_oldest_open_entry_age_seconds ",
		// h1 waits for approval; e1 was replayed and is no longer open.
		`replayctl_open_entries{source="jsonl",topic="tool.email.send"} 1` + "\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// Every metric the shipped Grafana dashboard queries exists in the registry
// /metrics serves, so no panel is silently empty after a rename.
func TestGrafanaDashboardNamesOnlyRegisteredMetrics(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("h1", "timeout", `,"labels":{"risk":"high"}`)})
	b.reconcile("operator")
	fams, err := b.srv.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range fams {
		have[f.GetName()] = true
	}
	data, err := os.ReadFile("../../deploy/grafana/replayctl.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct{ List []struct{ Query any } }
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
		}
	}
	name := regexp.MustCompile(`\breplayctl_[a-z_]+`)
	n := 0
	for _, e := range exprs {
		for _, m := range name.FindAllString(e, -1) {
			n++
			base := m
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if s, ok := strings.CutSuffix(m, suf); ok && have[s] {
					base = s
				}
			}
			if !have[base] {
				t.Errorf("dashboard queries %s (in %q), which /metrics does not export", m, e)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d metric references in the dashboard", n)
	}
}
