package source

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// drainingPages serves one page of a live DLQ (Cordum's gateway page or
// Nexora's list) whose records are set per read: as the DLQ drains, a bad
// record moves up the page. Cordum's gateway sends next_cursor null on a
// short page (cordum-io/cordum core/controlplane/gateway/handlers_dlq.go:82-94
// at 51b6141); Nexora answers {"items","page","size"} (iamvirul/nexora
// ObserveCommand.java, GET /api/dead-letters).
type drainingPages struct {
	*httptest.Server
	mu    sync.Mutex
	items []string
}

func newDrainingPages(t *testing.T) *drainingPages {
	d := &drainingPages{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		list := "[" + strings.Join(d.items, ",") + "]"
		if r.URL.Path == "/api/v1/dlq/page" {
			fmt.Fprintf(w, `{"items":%s,"next_cursor":null}`, list)
			return
		}
		fmt.Fprintf(w, `{"items":%s,"page":0,"size":100}`, list)
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *drainingPages) set(items ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.items = items
}

// TestLiveUndecodableKeepsItsNameAsItMoves: an undecodable record of a live
// page was named by its position (URL#INDEX), which shifts as records ahead
// of it leave the DLQ, so every run quarantined the same record again under
// a new name. It is now named by its own id when the raw record has one
// (Cordum's job_id, Nexora's id), else by a hash of its bytes, wherever it
// is on the page.
func TestLiveUndecodableKeepsItsNameAsItMoves(t *testing.T) {
	cordumOK := func(id string) string {
		return fmt.Sprintf(`{"job_id":%q,"topic":"t","status":"JOB_STATUS_FAILED","reason_code":"timeout","created_at":"2026-11-20T10:00:00Z"}`, id)
	}
	nexoraOK := func(id string) string {
		return fmt.Sprintf(`{"id":%q,"executionId":"x","goal":"g","context":{},"failureCode":"STEP_FAILED","failureMessage":"m","failedAt":"2026-11-20T12:00:00Z","reviewState":"PENDING","resolveReason":null}`, id)
	}
	for _, tt := range []struct {
		name, kind string
		ok         func(string) string
		bad        string
		want       string
	}{
		// attempts of the wrong type: the record does not decode, its id reads.
		{"cordum job_id", "cordum", cordumOK, `{"job_id":"job_bad","attempts":"three","created_at":"2026-11-20T10:00:00Z"}`, "job_bad"},
		// no job_id at all: named by its content.
		{"cordum no id", "cordum", cordumOK, `{"topic":"t","reason":"lost its id"}`, "sha256:"},
		{"nexora id", "nexora", nexoraOK, `{"id":"dl-bad","failedAt":"not a time","reviewState":"PENDING"}`, "dl-bad"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := newDrainingPages(t)
			s, err := newLiveSource(tt.kind+":"+d.URL, tt.kind, d.URL, envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			badID := func() string {
				t.Helper()
				es, err := readLive(t, s)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, e := range es {
					if e.Undecodable() {
						ids = append(ids, e.ID)
						if !strings.HasPrefix(e.Origin, s.OriginPrefix()) {
							t.Errorf("origin %q", e.Origin)
						}
						if e.IdempotencyKey == entry.DeriveKey(tt.kind, e.ID) {
							t.Errorf("undecodable %s has the key its decoded record would get", e.ID)
						}
					}
				}
				if len(ids) != 1 {
					t.Fatalf("undecodable %v, want one", ids)
				}
				return ids[0]
			}
			// Run 1: the bad record third; two records ahead of it are then
			// replayed and leave, and it is first on run 2.
			d.set(tt.ok("a1"), tt.ok("a2"), tt.bad, tt.ok("a3"))
			first := badID()
			d.set(tt.bad, tt.ok("a3"))
			second := badID()
			if first != second || !strings.HasPrefix(first, tt.want) {
				t.Fatalf("named %q on run 1 and %q on run 2, want one name starting %q", first, second, tt.want)
			}
		})
	}
}

// TestStableID: the id is read from the raw record when it is there, as a
// string or a number; otherwise the content hash ignores surrounding white
// space and tells different records apart.
func TestStableID(t *testing.T) {
	for raw, want := range map[string]string{
		`{"job_id":"j1","attempts":"x"}`: "j1",
		`{"job_id":"","id":"j2"}`:        "j2",
		`{"job_id":42}`:                  "42",
		`{"job_id":null}`:                "sha256:",
		`{"job_id":"j3"`:                 "sha256:", // not JSON: hashed
	} {
		if got := records.StableID([]byte(raw), "job_id", "id"); !strings.HasPrefix(got, want) || (want == "sha256:" && len(got) != len(want)+32) {
			t.Errorf("%s: %q, want %q", raw, got, want)
		}
	}
	a, b := records.StableID([]byte(` {"x":1} `), "id"), records.StableID([]byte(`{"x":1}`), "id")
	if a != b || a == records.StableID([]byte(`{"x":2}`), "id") {
		t.Errorf("hashes: %q %q", a, b)
	}
}
