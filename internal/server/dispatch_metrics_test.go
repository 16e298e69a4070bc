package server

import (
	"regexp"
	"strings"
	"testing"
)

// Issue 19: "dispatch latency by target". Every dispatch of a run is
// observed under its route's name; a --target URL never puts credentials
// or a query in the label.
func TestDispatchDurationByTarget(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("e2", "timeout", ""), line("q1", "schema_invalid", "")})
	if m := scrape(t, b); strings.Contains(m, "replayctl_dispatch_duration_seconds_count") {
		t.Fatal("a dispatch observed before any run")
	}
	b.reconcile("operator")
	m := scrape(t, b)
	if !strings.Contains(m, `replayctl_dispatch_duration_seconds_count{target="sink"} 2`+"\n") {
		t.Fatalf("want 2 dispatches to sink observed, got:\n%s", grepLines(m, "replayctl_dispatch_duration"))
	}
	if !regexp.MustCompile(`(?m)^replayctl_dispatch_duration_seconds_bucket\{target="sink",le="\+Inf"\} 2$`).MatchString(m) {
		t.Fatalf("histogram buckets:\n%s", grepLines(m, "replayctl_dispatch_duration"))
	}
	for in, want := range map[string]string{
		"https://user:pw@hooks.example/replay?token=abc": "https://hooks.example/replay",
		"cordum:https://gw.example:8081":                 "cordum:https://gw.example:8081",
		"nexora:http://u:p@nx.example/x?y=1":             "nexora:http://nx.example/x",
		"payments-api":                                   "payments-api",
	} {
		if got := targetLabel(in); got != want {
			t.Errorf("targetLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
