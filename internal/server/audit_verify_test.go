package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
)

// Issue 14: GET /api/audit/verify and the UI audit page verified without
// the HMAC key and said ok on a chain the CLI with the key called BROKEN.
// The bundle's store writes without the key, so a server that has one must
// find the head unsigned.
func TestServerVerifiesAuditWithItsKey(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")}, func(c *Config) { c.AuditKey = []byte("k1") })
	b.reconcile("operator")
	code, body := b.do("GET", "/api/audit/verify", "viewer", "")
	var res audit.VerifyResult
	if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil {
		t.Fatalf("%d %s", code, body)
	}
	if res.OK() || !strings.Contains(res.Break.Reason, "head signature does not match") {
		t.Fatalf("API verify with the key: %s, want the signature break", body)
	}
	code, body = b.do("GET", "/audit", "viewer", "")
	if code != 200 || !strings.Contains(body, "chain broken") || !strings.Contains(body, "head signature does not match") {
		t.Fatalf("UI audit page with the key: %d\n%s", code, body)
	}
}

// Without a key the server says which check it could not make.
func TestServerVerifyNamesUncheckedChecks(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	b.reconcile("operator")
	_, body := b.do("GET", "/api/audit/verify", "viewer", "")
	var res audit.VerifyResult
	if err := json.Unmarshal([]byte(body), &res); err != nil || !res.OK() || res.Signed {
		t.Fatalf("%s %v", body, err)
	}
	if !strings.Contains(body, "no audit key configured") {
		t.Fatalf("verify without a key does not say the signature was not checked: %s", body)
	}
	if _, body := b.do("GET", "/audit", "viewer", ""); !strings.Contains(body, "not checked: head signature") {
		t.Fatalf("UI audit page does not say the signature was not checked:\n%s", body)
	}
}

// GET /api/audit/export (for `audit export --server`) streams one JSON line
// per record, in chain order, the same lines audit.Export writes locally.
func TestServerExportsAuditChain(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("e2", "timeout", "")})
	b.reconcile("operator")
	code, body := b.do("GET", "/api/audit/export", "viewer", "")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("export has %d line(s), want one per record:\n%s", len(lines), body)
	}
	prev := ""
	for i, l := range lines {
		var rec struct {
			Seq  uint64          `json:"seq"`
			Prev string          `json:"prev"`
			Hash string          `json:"hash"`
			Body json.RawMessage `json:"record"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, l)
		}
		if rec.Seq != uint64(i+1) || (i > 0 && rec.Prev != prev) || len(rec.Body) == 0 {
			t.Fatalf("line %d out of chain (prev hash %q): %s", i+1, prev, l)
		}
		prev = rec.Hash
	}
}

// GET /api/snapshots/{id} serves the snapshot a decision recorded, which
// `audit replay-decision --server` re-runs it on; an unknown id is a 404.
func TestServerServesPolicySnapshot(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	b.reconcile("operator")
	code, body := b.do("GET", "/api/audit/1", "viewer", "")
	var rec audit.Record
	if err := json.Unmarshal([]byte(body), &rec); code != 200 || err != nil || rec.PolicySnapshot == "" {
		t.Fatalf("%d %s %v", code, body, err)
	}
	code, body = b.do("GET", "/api/snapshots/"+url.PathEscape(rec.PolicySnapshot), "viewer", "")
	var snap struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &snap); code != 200 || err != nil || snap.ID != rec.PolicySnapshot {
		t.Fatalf("snapshot %s: %d %s", rec.PolicySnapshot, code, body)
	}
	if code, body := b.do("GET", "/api/snapshots/sha256:nope", "viewer", ""); code != 404 || !strings.Contains(body, "no policy snapshot sha256:nope") {
		t.Fatalf("unknown snapshot: %d %s", code, body)
	}
}

// Issue 29: GET /api/audit/export streamed a chain its own verify called
// broken, with a 200 and nothing to tell. It now ends at the break with an
// error line and the audit.ExportErrorTrailer trailer. The bundle's store
// writes without the key, so under the server's key the head is unsigned.
func TestServerExportEndsAtTheBreak(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")}, func(c *Config) { c.AuditKey = []byte("k1") })
	b.reconcile("operator")
	req, err := http.NewRequest("GET", b.http.URL+"/api/audit/export", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.tokens["viewer"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, `{"error":{"seq":`) || !strings.Contains(last, "head signature") {
		t.Fatalf("export of a chain broken under the key does not end with the error line:\n%s", data)
	}
	if tr := resp.Trailer.Get(audit.ExportErrorTrailer); !strings.Contains(tr, "head signature") {
		t.Fatalf("trailer %q", tr)
	}
}
