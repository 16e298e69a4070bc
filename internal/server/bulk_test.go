package server

import (
	"net/http"
	"strings"
	"testing"
)

// A bulk replay with nowhere to send is refused with 422 before a run
// starts: no audit record, no state change (issue 17; it used to start and
// move every entry to manual review).
func TestBulkReplayWithoutTargetRefusedBeforeAnyChange(t *testing.T) {
	b := newAPIBundle(t, []string{line("t1", "timeout", ""), line("t2", "timeout", "")})
	b.noTarget = true
	b.reconcile("operator")
	_, before := b.do("GET", "/api/dead-letters?state=ALL&size=100", "viewer", "")

	code, body := b.do("POST", "/api/dead-letters/replay?preview=true", "operator", `{"filter":{"reason_code":["timeout"]}}`)
	if code != http.StatusOK || !strings.Contains(body, `"no target":2`) {
		t.Fatalf("preview: %d %s", code, body)
	}
	code, body = b.do("POST", "/api/dead-letters/replay", "operator", `{"filter":{"reason_code":["timeout"]}}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, `"no_target"`) || !strings.Contains(body, "nothing was changed") {
		t.Fatalf("bulk replay without a target: %d %s", code, body)
	}
	b.srv.Wait()
	if _, after := b.do("GET", "/api/dead-letters?state=ALL&size=100", "viewer", ""); after != before {
		t.Fatalf("entries changed:\nbefore %s\nafter  %s", before, after)
	}
	if code, audit := b.do("GET", "/api/audit?kind=bulk", "viewer", ""); code != http.StatusOK || strings.Contains(audit, `"kind":"bulk"`) {
		t.Fatalf("a refused bulk replay was audited: %d %s", code, audit)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.got) != 0 {
		t.Fatalf("dispatched: %v", b.got)
	}
}
