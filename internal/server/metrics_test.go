package server

import (
	"io"
	"net/http"
	"regexp"
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
