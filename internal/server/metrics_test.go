package server

import (
	"io"
	"net/http"
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
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
