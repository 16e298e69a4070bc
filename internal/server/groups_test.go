package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/store"
)

// The groups API lists the failure groups and changes their lifecycle
// with the caller as the actor; a viewer may read but not act; a plan's
// approval request renders on the approvals page.
func TestGroupsAPI(t *testing.T) {
	b := newAPIBundle(t, []string{line("t1", "timeout", ""), line("t2", "timeout", ""), line("p1", "schema_invalid", "")})
	b.noTarget = true
	b.reconcile("operator")
	code, body := b.do("GET", "/api/groups", "viewer", "")
	var l GroupList
	if err := json.Unmarshal([]byte(body), &l); code != http.StatusOK || err != nil || len(l.Items) != 2 || l.Items[0].Open != 2 {
		t.Fatalf("GET /api/groups: %d %s", code, body)
	}
	id := l.Items[0].ID
	if code, body := b.do("GET", "/api/groups?limit=1", "viewer", ""); code != http.StatusOK || strings.Count(body, `"id"`) != 1 {
		t.Errorf("limit=1: %d %s", code, body)
	}
	if code, _ := b.do("POST", "/api/groups/"+id+"/hold", "viewer", `{"reason":"x"}`); code != http.StatusForbidden {
		t.Errorf("a viewer held a group: %d", code)
	}
	if code, body := b.do("POST", "/api/groups/"+id+"/hold", "operator", `{}`); code != http.StatusBadRequest {
		t.Errorf("a hold without a reason: %d %s", code, body)
	}
	code, body = b.do("POST", "/api/groups/"+id+"/hold", "operator", `{"reason":"fix pending","until":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	var st store.GroupState
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil || st.State != store.GroupHeld || st.By != "operator" || st.AuditSeq == 0 {
		t.Fatalf("hold: %d %s", code, body)
	}
	if code, _ := b.do("POST", "/api/groups/"+id+"/release", "operator", `{}`); code != http.StatusOK {
		t.Errorf("release: %d", code)
	}
	if code, _ := b.do("POST", "/api/groups/"+id+"/release", "operator", `{}`); code != http.StatusConflict {
		t.Errorf("a second release: %d, want 409", code)
	}
	if code, _ := b.do("GET", "/api/groups/g00000000000", "viewer", ""); code != http.StatusNotFound {
		t.Errorf("unknown group: %d", code)
	}

	// A plan's request on the approvals page.
	if err := b.store.Update(context.Background(), func(tx store.Tx) error {
		return tx.PutApproval(&store.Approval{ID: "plan_0123456789abcdef", ApproverGroup: "platform-oncall", State: store.ApprovalPending,
			Evidence: "sha256:x", RequestedBy: "operator", RequestedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Reason: "after INC-42"})
	}); err != nil {
		t.Fatal(err)
	}
	ui := newBrowser(t, b.http.URL)
	ui.login(b.tokens["alice"], "")
	code, _, page := ui.get("/approvals")
	if code != http.StatusOK || !strings.Contains(page, `mass replay plan <a href="/plans/plan_0123456789abcdef"><code>plan_0123456789abcdef</code></a>`) || !strings.Contains(page, "runs start plan_0123456789abcdef") {
		t.Errorf("approvals page with a plan: %d %s", code, page[:min(len(page), 300)])
	}
}
