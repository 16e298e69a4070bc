package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestBreakersAndNextAttemptAreShown (issue 15): a target answering 503
// opens its breaker; GET /api/stats and the overview say so, with when the
// next trial goes out, and the entry page says when its retry is due.
func TestBreakersAndNextAttemptAreShown(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	b := newAPIBundle(t, []string{line("e1", "timeout", "")}, func(c *Config) {
		c.Breakers = &replay.Breakers{Failures: 1, Clock: replay.SystemClock{}}
		c.Router = func(rules *triage.Rules) replay.Router {
			return replay.NewRulesRouter(rules, &replay.Route{Name: "sink", Dispatcher: replay.NewHTTPTarget(down.URL, "", 2*time.Second, nil)})
		}
	})
	b.reconcile("operator")

	code, body := b.do("GET", "/api/stats", "viewer", "")
	var st replay.Stats
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("stats: %d %s %v", code, body, err)
	}
	if len(st.Breakers) != 1 || st.Breakers[0].Target != "sink" || st.Breakers[0].State != replay.BreakerOpen || st.Breakers[0].Until.IsZero() {
		var er *store.EntryRecord
		_ = b.store.View(context.Background(), func(tx store.Tx) error { er, _ = tx.Entry("jsonl:e1"); return nil })
		t.Fatalf("stats breakers: %+v (e1 %s %q)", st.Breakers, er.Status, er.Reason)
	}

	var er *store.EntryRecord
	_ = b.store.View(context.Background(), func(tx store.Tx) error { er, _ = tx.Entry("jsonl:e1"); return nil })
	if er == nil || er.NextAttemptAt.IsZero() {
		t.Fatalf("setup: e1 has no due retry: %+v", er)
	}
	ui := newBrowser(t, b.http.URL)
	ui.login(b.tokens["viewer"], "/")
	_, _, page := ui.get("/")
	if !strings.Contains(page, `id="breakers"><li>sink: <span class="pill">open</span>, next trial `) {
		t.Fatalf("overview lacks the open breaker:\n%s", page)
	}
	_, _, page = ui.get("/entries/jsonl:e1")
	want := `due at <span id="next-at">` + er.NextAttemptAt.UTC().Format("2006-01-02 15:04:05Z") + `</span>`
	if !strings.Contains(page, want) {
		t.Fatalf("entry page lacks %q:\n%s", want, page)
	}
}
