package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
)

// FuzzRequestBody feeds arbitrary bytes to the API's JSON body decoding
// for every body type: it must never panic, and a body it refuses must get
// a 4xx with a JSON error, never a 5xx.
func FuzzRequestBody(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"reason":"x"}`, `{"reason":"x","extra":1}`, `{"reason":1}`, `[]`, `null`,
		`{"filter":{"state":["pending"],"class":"transient"},"max":5,"spread":"10s","reason":"r"}`,
		`{"filter":{},"spread":"forever"}`, `{"max":-1}`, `{"reason":"x"} trailing`, `{"reason":"\ud800"}`,
		`{"filter":{"since":"2026-01-01T00:00:00Z"}}`, strings.Repeat(`[`, 10000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range []func() any{func() any { return &reasonBody{} }, func() any { return &BulkRequest{} }} {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/api/dead-letters/replay", strings.NewReader(string(body)))
			if readJSON(w, r, v()) {
				if w.Code != http.StatusOK || w.Body.Len() != 0 {
					t.Fatalf("accepted body wrote a response: %d %s", w.Code, w.Body)
				}
				continue
			}
			if w.Code < 400 || w.Code >= 500 {
				t.Fatalf("refused body answered %d", w.Code)
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" {
				t.Fatalf("refusal is not a JSON error: %q %v", w.Body, err)
			}
		}
	})
}

// FuzzQueryParams feeds arbitrary query strings to the API's query
// decoding (list states, paging, approval state, audit checkpoint): never a
// panic, and every error is a bad request, not an internal one.
func FuzzQueryParams(f *testing.F) {
	for _, s := range []string{
		``, `state=open`, `state=ALL&page=2&size=5`, `state=bogus`, `page=-1`, `size=99999999999999999999`,
		`state=all`, `state=Pending`, `checkpoint_seq=3&checkpoint_head=sha256:ab&checkpoint_mac=x`,
		`checkpoint_seq=x`, `checkpoint_head=h`, `checkpoint_seq=1&checkpoint_head=h&checkpoint_time=yesterday`, `%zz`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return // net/http answers 400 before any handler
		}
		r := httptest.NewRequest(http.MethodGet, "/api/dead-letters", nil)
		r.URL.RawQuery = q.Encode()
		if _, err := ParseStates(q["state"]); err != nil && !isBadRequest(err) {
			t.Fatalf("states %q: %v", q["state"], err)
		}
		for _, p := range []string{"page", "size"} {
			if n, err := intParam(r, p, 0); err != nil && !isBadRequest(err) || n < 0 {
				t.Fatalf("%s: %d %v", p, n, err)
			}
		}
		if st, err := approvalState(q.Get("state")); err != nil && !isBadRequest(err) || err == nil && strings.EqualFold(q.Get("state"), "all") && st != "" {
			t.Fatalf("approval state %q: %q %v", q.Get("state"), st, err)
		}
		cp, err := audit.CheckpointFromQuery(q)
		if err == nil && cp != nil {
			// What parses round-trips through Query.
			again, err := audit.CheckpointFromQuery(cp.Query())
			if err != nil || again.Seq != cp.Seq || again.Head != cp.Head || again.MAC != cp.MAC || !again.Time.Equal(cp.Time) {
				t.Fatalf("checkpoint %+v does not round-trip: %+v %v", cp, again, err)
			}
		}
	})
}

func isBadRequest(err error) bool {
	w := httptest.NewRecorder()
	serviceError(w, err)
	return w.Code == http.StatusBadRequest
}
