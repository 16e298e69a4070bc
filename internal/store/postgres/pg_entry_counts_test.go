package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

// recountEntries is what Counters, Series' inflow and a scrape read
// before the entry counters: every entry, counted in Go.
func recountEntries(t *testing.T, p *Postgres, from, to time.Time) (*store.Counters, map[time.Time]store.HourCount) {
	t.Helper()
	c := &store.Counters{Topics: map[string]int64{}, Days: map[string]int64{}}
	cells, open := map[store.Cell]int64{}, map[store.Depth]int64{}
	sigs := map[string]*store.SignatureCount{}
	hours := map[time.Time]store.HourCount{}
	err := p.Entries(context.Background(), func(r *store.EntryRecord) error {
		c.Entries++
		cells[store.Cell{Source: r.Entry.Source, Class: string(r.Class), Action: string(r.Action), State: r.Status}]++
		c.Topics[store.ValKey(r.Entry.Topic)]++
		c.Days[r.FirstSeen.UTC().Format("2006-01-02")]++
		if store.IsOpen(r.Status) {
			open[store.Depth{Source: r.Entry.Source, Topic: store.ValKey(r.Entry.Topic)}]++
			if lf := store.LastFailure(r); !lf.IsZero() && (c.OldestOpen.IsZero() || lf.Before(c.OldestOpen)) {
				c.OldestOpen = lf.UTC()
			}
		}
		sig := store.Signature(r)
		sc := sigs[sig]
		if sc == nil {
			sc = &store.SignatureCount{Signature: sig}
			sigs[sig] = sc
		}
		// Refs are written so byte order and the database's collation agree.
		if sc.Example == "" || r.Entry.Ref() < sc.Example {
			sc.Example, sc.Class = r.Entry.Ref(), string(r.Class)
		}
		sc.N++
		if h := r.FirstSeen.UTC().Truncate(time.Hour); !r.FirstSeen.IsZero() && !h.Before(from) && !h.After(to) {
			hc := hours[h]
			hc.Hour = h
			hc.Inflow++
			hc.AddClass(&hc.InflowByClass, string(r.Class), 1)
			hours[h] = hc
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range cells {
		k.N = n
		c.Cells = append(c.Cells, k)
	}
	for k, n := range open {
		k.N = n
		c.Open = append(c.Open, k)
	}
	sort.Slice(c.Cells, func(i, j int) bool { return fmt.Sprint(c.Cells[i]) < fmt.Sprint(c.Cells[j]) })
	sort.Slice(c.Open, func(i, j int) bool { return fmt.Sprint(c.Open[i]) < fmt.Sprint(c.Open[j]) })
	for _, sc := range sigs {
		c.Signatures = append(c.Signatures, *sc)
	}
	sort.Slice(c.Signatures, func(i, j int) bool {
		a, b := c.Signatures[i], c.Signatures[j]
		if a.N != b.N {
			return a.N > b.N
		}
		return a.Signature < b.Signature
	})
	return c, hours
}

// mixedEntry is entry i of a mixed run: four sources, five topics (one
// longer than an index value), messages of three signatures (digits are
// normalised away), first seen over five hours and two days, with
// nanoseconds, and one in ten never seen (zero time).
func mixedEntry(i int, base time.Time) *store.EntryRecord {
	src := []string{"jsonl", "cordum", "prodigy", "nexora"}[i%4]
	r := &store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("id%05d", i), Source: src,
		Topic:      []string{"orders.created", "orders.paid", "", "billing.x", strings.Repeat("t", 1100)}[i%5],
		ReasonCode: []string{"timeout", "bad_json", "timeout"}[i%3],
		Message:    fmt.Sprintf("%s after %d ms", []string{"upstream timed out", "invalid payload", "conn reset"}[i%3], i),
		Payload:    json.RawMessage(`{"n":1}`)},
		Status: store.StatusPending, Class: triage.Transient, Action: triage.AutoReplay}
	if i%7 == 0 {
		r.Entry.State.ErrorSignature = "custom-sig"
	}
	if i%10 != 9 {
		r.FirstSeen = base.Add(time.Duration(i%5)*7*time.Hour + time.Duration(i)*time.Millisecond + 123)
	}
	return r
}

// Issue 16, "reads independent of store size": Counters, Series' inflow,
// Gauges and PendingApprovals on PostgreSQL grouped the entries table (a
// row per entry) or listed every approval. After a mixed run (ingest,
// concurrent writers moving entries between cells, rolled-back
// transactions, approvals asked and decided) they equal a full recount,
// and every statement they send reads entries, approvals and the audit
// only through an index condition (checked on the statement's generic
// plan with sequential scans disabled), never a row per entry.
func TestPostgresEntryCountersEqualARecount(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	const n = 240
	recs := make([]*store.EntryRecord, n)
	for i := range recs {
		recs[i] = mixedEntry(i, base)
	}
	if got, err := p.Ingest(ctx, recs); err != nil || got != n {
		t.Fatalf("ingest: %d, %v", got, err)
	}
	// Ingesting again adds nothing (ON CONFLICT DO NOTHING fires no trigger).
	if got, err := p.Ingest(ctx, recs[:10]); err != nil || got != 0 {
		t.Fatalf("ingest again: %d, %v", got, err)
	}
	errRollback := errors.New("roll back")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				err := p.Update(ctx, func(tx store.Tx) error {
					// Two entries a transaction, so writers cross.
					for _, j := range []int{i, (i*7 + 3) % n} {
						r, err := tx.Entry(recs[j].Entry.Ref())
						if err != nil || r == nil {
							return fmt.Errorf("read %d: %v", j, err)
						}
						switch (i + j) % 5 {
						case 0:
							r.Status, r.Action = store.StatusReplayed, triage.AutoReplay
						case 1:
							r.Status, r.Class, r.Action = store.StatusQuarantined, triage.Poison, triage.Quarantine
						case 2:
							r.Status = store.StatusResolved
						case 3:
							r.Reason = "only the reason changes"
						}
						if err := tx.PutEntry(r); err != nil {
							return err
						}
					}
					if i%3 == 0 {
						a := &store.Approval{ID: fmt.Sprintf("apr_%03d", i), EntryRef: recs[i].Entry.Ref(), State: store.ApprovalPending,
							RequestedAt: base.Add(time.Duration(n-i) * time.Second)}
						if i%9 == 0 {
							a.State = "approved"
						}
						if err := tx.PutApproval(a); err != nil {
							return err
						}
					}
					if i%11 == 5 {
						return errRollback
					}
					return nil
				})
				if err != nil && !errors.Is(err, errRollback) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	from, to := base.Add(7*time.Hour), base.Add(22*time.Hour)
	want, wantHours := recountEntries(t, p, from, to)
	if len(want.Cells) < 6 || len(want.Signatures) < 3 || len(want.Open) < 4 || len(wantHours) < 2 || want.Entries != n {
		t.Fatalf("the run did not mix entries: %+v, %d hours", want, len(wantHours))
	}
	var wantPending []string
	if err := p.Approvals(ctx, func(a *store.Approval) error {
		if a.State == store.ApprovalPending {
			wantPending = append(wantPending, a.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Oldest first: requested_at falls as the index rises.
	sort.Sort(sort.Reverse(sort.StringSlice(wantPending)))
	if len(wantPending) < 5 {
		t.Fatalf("the run asked %d pending approvals", len(wantPending))
	}

	p.stopSealer()
	p.stopSealer = nil
	before := p.Trips()
	got, err := p.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	series, err := p.Series(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.Gauges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gotPending []string
	if err := p.PendingApprovals(ctx, func(a *store.Approval) error { gotPending = append(gotPending, a.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	after := p.Trips()

	got.Decisions, got.Denied, got.Outcomes = 0, 0, nil // pg_counts_test.go checks these
	if !reflect.DeepEqual(got, want) {
		t.Errorf("counters:\n%+v\nrecount:\n%+v", got, want)
	}
	gotHours := inflowHours(series)
	if !reflect.DeepEqual(gotHours, wantHours) {
		t.Errorf("series inflow: %+v\nrecount: %+v", gotHours, wantHours)
	}
	if wg := (&store.Gauges{Cells: want.Cells, Open: want.Open, OldestOpen: want.OldestOpen}); !reflect.DeepEqual(g, wg) {
		t.Errorf("gauges: %+v\nrecount: %+v", g, wg)
	}
	if !reflect.DeepEqual(gotPending, wantPending) {
		t.Errorf("pending approvals: %v\nwant %v", gotPending, wantPending)
	}

	var sent []string
	for sql, k := range after.ByStatement {
		if k > before.ByStatement[sql] {
			sent = append(sent, sql)
		}
	}
	assertIndexBounded(t, p, sent)

	// A store written before the counters existed gets them when migrated:
	// drop them, clear the columns, and run migration 8's step again, then
	// migration 9 (its triggers), as opening such a store does.
	if _, err := p.pool.Exec(ctx, `DROP TRIGGER entries_count ON entries; DROP TRIGGER entries_recount ON entries;
		DELETE FROM entry_counts; UPDATE entries SET sig = NULL, seen = NULL, open_seen = NULL; UPDATE approvals SET pending = false, requested_at = NULL`); err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if err := backfillEntryCounts(ctx, tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, pgEntryTriggers)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	again, err := p.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again.Decisions, again.Denied, again.Outcomes = 0, 0, nil
	if !reflect.DeepEqual(again, want) {
		t.Errorf("backfilled counters:\n%+v\nrecount:\n%+v", again, want)
	}
	gotPending = nil
	if err := p.PendingApprovals(ctx, func(a *store.Approval) error { gotPending = append(gotPending, a.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotPending, wantPending) {
		t.Errorf("backfilled pending approvals: %v\nwant %v", gotPending, wantPending)
	}
	// The triggers are back: a new entry is counted.
	if _, err := p.Ingest(ctx, []*store.EntryRecord{mixedEntry(n, base)}); err != nil {
		t.Fatal(err)
	}
	if c, err := p.Counters(ctx); err != nil || c.Entries != n+1 {
		t.Errorf("after the backfill a new entry is not counted: %d, %v", c.Entries, err)
	}
}

// perEntryTables grow by a row per entry (or per approval or record).
var perEntryTables = map[string]bool{"entries": true, "audit": true, "approvals": true}

// assertIndexBounded explains each statement's generic plan with
// sequential scans disabled: a scan of a per-entry table must be an index
// scan with an index condition, or of a partial index (the pending
// approvals: what bbolt's index holds too).
func assertIndexBounded(t *testing.T, p *Postgres, sqls []string) {
	t.Helper()
	ctx := context.Background()
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, `RESET enable_seqscan; RESET plan_cache_mode`)
	param := regexp.MustCompile(`\$(\d+)`)
	for i, sql := range sqls {
		nparams := 0
		for _, m := range param.FindAllStringSubmatch(sql, -1) {
			var k int
			fmt.Sscan(m[1], &k)
			nparams = max(nparams, k)
		}
		name := fmt.Sprintf("bounded_%d", i)
		if _, err := conn.Exec(ctx, `PREPARE `+name+` AS `+sql); err != nil {
			t.Fatalf("prepare %s: %v", sql, err)
		}
		args := strings.TrimSuffix(strings.Repeat("NULL,", nparams), ",")
		exec := `EXPLAIN (FORMAT JSON) EXECUTE ` + name
		if nparams > 0 {
			exec += "(" + args + ")"
		}
		var plan []map[string]any
		if err := conn.QueryRow(ctx, exec).Scan(&plan); err != nil {
			t.Fatalf("explain %s: %v", sql, err)
		}
		// limited: under a Limit node (min() of an index is one such).
		var walk func(node map[string]any, limited bool)
		walk = func(node map[string]any, limited bool) {
			typ, _ := node["Node Type"].(string)
			if rel, _ := node["Relation Name"].(string); perEntryTables[rel] {
				_, cond := node["Index Cond"]
				_, recheck := node["Recheck Cond"] // a bitmap heap scan of an index condition
				idx, _ := node["Index Name"].(string)
				ok := (strings.HasPrefix(typ, "Index") && (cond || limited || idx == "approvals_pending")) ||
					(typ == "Bitmap Heap Scan" && recheck)
				if !ok {
					t.Errorf("%s reads %s by %s %s without an index condition", sql, rel, typ, idx)
				}
			}
			kids, _ := node["Plans"].([]any)
			for _, k := range kids {
				if m, ok := k.(map[string]any); ok {
					walk(m, limited || typ == "Limit")
				}
			}
		}
		for _, top := range plan {
			if m, ok := top["Plan"].(map[string]any); ok {
				walk(m, false)
			}
		}
		conn.Exec(ctx, `DEALLOCATE `+name)
	}
}

// inflowHours is series' hours with an inflow, keyed by hour (UTC), as a
// recount builds them.
func inflowHours(series []store.HourCount) map[time.Time]store.HourCount {
	out := map[time.Time]store.HourCount{}
	for _, h := range series {
		if h.Inflow != 0 {
			out[h.Hour.UTC()] = store.HourCount{Hour: h.Hour.UTC(), Inflow: h.Inflow, InflowByClass: h.InflowByClass}
		}
	}
	return out
}
