package server

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// countingStore is the real store counting the rows a scrape reads:
// counter rows and approval records. Whole-store reads fail the test
// (noScanStore).
type countingStore struct {
	noScanStore
	rows *int
}

func (c countingStore) Gauges(ctx context.Context) (*store.Gauges, error) {
	g, err := c.Bolt.Gauges(ctx)
	if err == nil {
		*c.rows += len(g.Cells) + len(g.Open) + 1
	}
	return g, err
}

func (c countingStore) Counters(ctx context.Context) (*store.Counters, error) {
	cn, err := c.Bolt.Counters(ctx)
	if err == nil {
		*c.rows += len(cn.Cells) + len(cn.Open) + len(cn.Topics) + len(cn.Days) + len(cn.Signatures) + len(cn.Outcomes) + 1
	}
	return cn, err
}

func (c countingStore) PendingApprovals(ctx context.Context, fn func(*store.Approval) error) error {
	return c.Bolt.PendingApprovals(ctx, func(a *store.Approval) error {
		*c.rows++
		return fn(a)
	})
}

// fillMetricsStore writes the same open entries and requests into every
// store, then closed entries that each bring a new failure signature and
// day (what grows with a store's age), and as many decided requests.
func fillMetricsStore(t *testing.T, now time.Time, closed int) *bolt.Bolt {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	put := func(tx store.Tx, i int, src, topic, status string, class triage.Class, msg string, first time.Time) error {
		return tx.PutEntry(&store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("e%05d", i), Source: src, Topic: topic,
			ReasonCode: "timeout", Message: msg, IdempotencyKey: fmt.Sprintf("k%05d", i),
			// Last failures in another order than first seen: the age is since the last one.
			LastFailure: now.Add(-time.Duration((i*7)%20+1) * time.Hour)},
			Status: status, Class: class, Action: triage.AutoReplay, FirstSeen: first, LastSeen: first})
	}
	ask := func(tx store.Tx, id, group, state string, at, expires time.Time) error {
		return tx.PutApproval(&store.Approval{ID: id, EntryRef: "jsonl:" + id, ApproverGroup: group, State: state,
			RequestedAt: at, ExpiresAt: expires})
	}
	err = st.Update(context.Background(), func(tx store.Tx) error {
		states := []string{store.StatusPending, store.StatusAwaitingApproval, store.StatusReplayed, store.StatusQuarantined, store.StatusResolved}
		for i := range 20 {
			src, topic := []string{"jsonl", "cordum"}[i%2], fmt.Sprintf("orders.t%d", i%3)
			if err := put(tx, i, src, topic, states[i%len(states)], []triage.Class{triage.Transient, triage.Poison}[i%2],
				"upstream timeout", now.Add(-time.Duration(i+1)*time.Hour)); err != nil {
				return err
			}
		}
		for _, a := range []struct {
			id, group string
			age       time.Duration
			expires   time.Time
		}{
			{"a1", "payments", 5 * time.Hour, time.Time{}},
			{"a2", "payments", time.Hour, now}, // expires at this instant: still pending, as approval.Service says
			{"a3", "sre", 2 * time.Hour, time.Time{}},
			{"a4", "sre", 9 * time.Hour, now.Add(-time.Minute)}, // expired
		} {
			if err := ask(tx, a.id, a.group, store.ApprovalPending, now.Add(-a.age), a.expires); err != nil {
				return err
			}
		}
		// Closed entries in a cell and topic the open ones already use.
		for i := range closed {
			word := strings.Map(func(r rune) rune { return 'g' + (r-'0')%20 }, fmt.Sprint(i))
			if err := put(tx, 1000+i, "jsonl", "orders.t0", store.StatusReplayed, triage.Transient,
				"unknown field "+word, now.Add(-time.Duration(i+1)*24*time.Hour)); err != nil {
				return err
			}
			if err := ask(tx, fmt.Sprintf("d%05d", i), "payments", store.ApprovalApproved, now.Add(-time.Duration(i+1)*24*time.Hour), time.Time{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// gatherValues is each gauge a scrape gives as name{label=value,...}
// (the named families only, when any is named).
func gatherValues(t *testing.T, reg *prometheus.Registry, families ...string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if len(families) > 0 && !slices.Contains(families, f.GetName()) {
			continue
		}
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = mt.GetGauge().GetValue()
		}
	}
	return got
}

// recount is what a scrape must say, from a full read of the store: the
// entries one by one and the requests as approval.Service lists them.
func recount(t *testing.T, st *bolt.Bolt, now time.Time) map[string]float64 {
	t.Helper()
	ctx := context.Background()
	want := map[string]float64{}
	var oldest time.Time
	err := st.Entries(ctx, func(er *store.EntryRecord) error {
		want[fmt.Sprintf("replayctl_entries{action=%s,class=%s,state=%s}", er.Action, er.Class, er.Status)]++
		if store.IsOpen(er.Status) {
			want[fmt.Sprintf("replayctl_open_entries{source=%s,topic=%s}", er.Entry.Source, er.Entry.Topic)]++
			if lf := store.LastFailure(er); oldest.IsZero() || lf.Before(oldest) {
				oldest = lf // the age the list and --older-than use
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want["replayctl_oldest_open_entry_age_seconds{}"] = now.Sub(oldest).Seconds()
	list, err := (&approval.Service{Store: st, Now: func() time.Time { return now }}).List(ctx, approval.Filter{State: store.ApprovalPending})
	if err != nil {
		t.Fatal(err)
	}
	var oldestAsk time.Duration
	for _, v := range list {
		want["replayctl_approvals_pending{group="+v.ApproverGroup+"}"]++
		oldestAsk = max(oldestAsk, now.Sub(v.RequestedAt))
	}
	want["replayctl_approvals_oldest_pending_age_seconds{}"] = oldestAsk.Seconds()
	return want
}

// A scrape reads the same number of rows from a store with 20 entries as
// from one with hundreds more closed entries, each with its own failure
// signature and day, and as many decided approval requests (issue 16:
// the ratio to a bare read grew from 100k to 1M entries), and every value
// equals a recount of the store.
func TestMetricsScrapeReadsBoundedRowsAndMatchesRecount(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	families := []string{"replayctl_entries", "replayctl_open_entries", "replayctl_oldest_open_entry_age_seconds",
		"replayctl_approvals_pending", "replayctl_approvals_oldest_pending_age_seconds"}
	var rows []int
	for _, closed := range []int{0, 400} {
		st := fillMetricsStore(t, now, closed)
		n := 0
		m := newRunMetrics(countingStore{noScanStore: noScanStore{st, t}, rows: &n}, func() time.Time { return now })
		got := gatherValues(t, m.reg, families...)
		rows = append(rows, n)
		want := recount(t, st, now)
		var diff []string
		for k := range merged(got, want) {
			if got[k] != want[k] {
				diff = append(diff, fmt.Sprintf("%s: scrape %v, recount %v", k, got[k], want[k]))
			}
		}
		sort.Strings(diff)
		if len(diff) > 0 {
			t.Errorf("%d closed entries: scrape differs from a recount:\n%s", closed, strings.Join(diff, "\n"))
		}
		if want["replayctl_approvals_pending{group=payments}"] != 2 || want["replayctl_approvals_pending{group=sre}"] != 1 {
			t.Fatalf("fixture: pending requests %v", want)
		}
	}
	if rows[0] == 0 || rows[1] != rows[0] {
		t.Fatalf("a scrape read %d rows from the small store and %d from the large one: it must not grow with the store", rows[0], rows[1])
	}
}

func merged(a, b map[string]float64) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
