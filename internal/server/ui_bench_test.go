package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// BenchmarkConsolePages times the overview, an entry list page and an
// entry page against a store of n entries (each with one decision in the
// audit chain, over 30 days), each as a ratio of a bare store read of what the page
// shows: the whole inventory for the overview (which summarises it), the
// 50 rows for a list page, the one row for an entry page. Sizes:
// REPLAYCTL_BENCH_ENTRIES (comma-separated, default 10000), e.g.
// REPLAYCTL_BENCH_ENTRIES=100000,1000000 go test -run '^$' -bench ConsolePages -benchtime 3x ./internal/server/
func BenchmarkConsolePages(b *testing.B) {
	sizes := []int{10000}
	if v := os.Getenv("REPLAYCTL_BENCH_ENTRIES"); v != "" {
		sizes = nil
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 100 {
				b.Fatalf("REPLAYCTL_BENCH_ENTRIES: %q is not a size of at least 100", s)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) { benchConsole(b, n) })
	}
}

func benchConsole(b *testing.B, n int) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(b.TempDir(), "bench.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	classes := []triage.Class{triage.Transient, triage.Poison, triage.Governance}
	statuses := []string{store.StatusPending, store.StatusQuarantined, store.StatusReplayed, store.StatusManualReview}
	// Small transactions, as reconcile writes: bbolt splits its nodes at each
	// commit, so a big one inserting keys into the middle of its ranges
	// spends its time moving node tails (and is no store a run writes).
	const batch = 500
	for i := 0; i < n; i += batch {
		if err := st.Update(ctx, func(tx store.Tx) error {
			for j := i; j < min(i+batch, n); j++ {
				e := entry.Entry{ID: fmt.Sprintf("e%08d", j), Source: "jsonl", Topic: fmt.Sprintf("tool.t%d.send", j%20),
					ReasonCode: "timeout", Message: fmt.Sprintf("upstream timeout after %d ms", j%997), Attempts: 3,
					IdempotencyKey: fmt.Sprintf("k%08d", j), Payload: []byte(fmt.Sprintf(`{"order":%d,"lines":[1,2,3]}`, j)),
					LastFailure: now.Add(-time.Duration(j%43200) * time.Minute)}
				er := &store.EntryRecord{Entry: e, Status: statuses[j%len(statuses)], Class: classes[j%len(classes)],
					Action: triage.ManualReview, FirstSeen: now.Add(-time.Duration(j%43200) * time.Minute)}
				er.LastSeen = er.FirstSeen
				if err := tx.PutEntry(er); err != nil {
					return err
				}
				// The chain grows in time order over 30 days, as a store's does.
				at := now.Add(-30 * 24 * time.Hour).Add(time.Duration(j) * 30 * 24 * time.Hour / time.Duration(n))
				if _, err := tx.Append(&audit.Record{Kind: audit.KindDecision, Actor: "bench", EntryRef: e.Ref(), Time: at,
					Action: triage.ManualReview, Reason: "benchmark"}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	tokens, err := LoadTokens(filepath.Join(b.TempDir(), "tokens.json"))
	if err != nil {
		b.Fatal(err)
	}
	secret, err := tokens.Create("bench", RoleAdmin, now)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Store: st, Tokens: tokens})
	if err != nil {
		b.Fatal(err)
	}
	get := func(path string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, w.Code, w.Body.String()[:min(200, w.Body.Len())])
		}
	}
	mid := fmt.Sprintf("jsonl:e%08d", n/2)
	bareScan := func() {
		if err := st.Entries(ctx, func(*store.EntryRecord) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	bareRows := func(k int) func() {
		return func() {
			if err := st.View(ctx, func(tx store.Tx) error {
				for j := range k {
					if _, err := tx.Entry(fmt.Sprintf("jsonl:e%08d", n/2+j)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	pages := []struct {
		name string
		page func()
		bare func()
	}{
		{"overview", func() { get("/") }, bareScan},
		{"list-page-2", func() { get("/entries?state=quarantined&page=2") }, bareRows(50)},
		// Issue #18's last scans, now index ranges: sorted by last failure,
		// two topic globs with an age.
		{"list-sorted-page-2", func() { get("/entries?state=open&sort=oldest&page=2") }, bareRows(50)},
		{"list-globs-age-page-2", func() { get("/entries?topic=tool.t1*.send,tool.t2.*&age=48h&page=2") }, bareRows(50)},
		{"entry", func() { get("/entries/" + mid) }, bareRows(1)},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			// The baseline, measured in the same run: best of 3.
			bare := time.Duration(1<<63 - 1)
			for range 3 {
				t0 := time.Now()
				p.bare()
				bare = min(bare, time.Since(t0))
			}
			b.ResetTimer()
			t0 := time.Now()
			for range b.N {
				p.page()
			}
			per := time.Since(t0) / time.Duration(b.N)
			b.ReportMetric(float64(per)/float64(bare), "x-bare-read")
			b.ReportMetric(float64(per.Microseconds())/1000, "ms/page")
		})
	}
}
