package webhook

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

// TestDispatchHeadersExactly: the headers of a dispatch are built for
// each request and handed to it without a copy (SendOwned). Each request
// carries exactly the content type, the configured headers (names in
// canonical form, a configured Content-Type replacing the default) and
// the entry's own id headers (which a configured header of the same name
// never replaces), and nothing of another request: requests sent
// concurrently each carry their own key, id and attempt.
func TestDispatchHeadersExactly(t *testing.T) {
	var mu sync.Mutex
	got := map[string]http.Header{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get("X-Replay-Entry-Id")] = r.Header.Clone()
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	conf := map[string]string{"authorization": "Bearer s3cret", "content-type": "application/vnd.x+json",
		"Idempotency-Key": "configured", "x-tenant": "t1"}
	h := NewHTTPTarget(srv.URL, "", 5*time.Second, conf)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := &entry.Entry{ID: "e" + strconv.Itoa(i), Source: "jsonl", Payload: []byte(`{"n":1}`)}
			res := h.Dispatch(context.Background(), connector.Request{Entry: e, Key: "k-" + strconv.Itoa(i), Attempt: i + 1})
			if res.Outcome != connector.Succeeded {
				t.Errorf("entry %d: %v %s", i, res.Outcome, res.Detail)
			}
		}()
	}
	wg.Wait()
	if len(got) != 16 {
		t.Fatalf("%d distinct requests, want 16", len(got))
	}
	for i := range 16 {
		id, n := "e"+strconv.Itoa(i), strconv.Itoa(i+1)
		want := http.Header{
			"Content-Type":           {"application/vnd.x+json"},
			"Authorization":          {"Bearer s3cret"},
			"X-Tenant":               {"t1"},
			"Idempotency-Key":        {"k-" + strconv.Itoa(i)},
			"X-Replay-Entry-Id":      {id},
			"X-Replay-Attempt":       {n},
			"Replayctl-Lineage":      {"jsonl:" + id},
			"Replayctl-Replay-Count": {n},
		}
		h := got[id]
		for _, k := range []string{"Accept-Encoding", "Content-Length", "User-Agent"} {
			delete(h, k) // net/http's own
		}
		if !maps.EqualFunc(h, want, slices.Equal) {
			t.Errorf("entry %s sent\n %v\nwant\n %v", id, h, want)
		}
	}
}

// TestSendLeavesTheCallersHeader: Send copies the caller's header (the
// callers that reuse one, the benchmarks' poster, pages); the request
// never changes it.
func TestSendLeavesTheCallersHeader(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3")
		_, _ = w.Write([]byte("abc"))
	}))
	defer srv.Close()
	h := http.Header{"Content-Type": {"application/json"}}
	c := NewHTTPTarget(srv.URL, "", 5*time.Second, nil).Client
	for range 3 {
		a, res := c.Send(context.Background(), http.MethodPost, srv.URL, h, []byte("{}"), 0)
		if res != nil || a.Status != http.StatusOK || string(a.Body) != "abc" {
			t.Fatalf("answer %+v %+v", a, res)
		}
	}
	if len(h) != 1 || len(h["Content-Type"]) != 1 || h.Get("Content-Type") != "application/json" {
		t.Errorf("the caller's header became %v", h)
	}
}
