package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

// recount is what Counters and Series read from the audit chain before
// they had counters: every record, counted by store.AuditCounts.
func recount(t *testing.T, p *Postgres, from, to time.Time) (store.Counters, map[time.Time]store.HourCount) {
	t.Helper()
	c := store.Counters{Outcomes: map[string]int64{}}
	hours := map[time.Time]store.HourCount{}
	err := audit.Each(context.Background(), p, audit.Query{}, func(r audit.Record) error {
		dec, den, o := store.AuditCounts(&r)
		h := r.Time.UTC().Truncate(time.Hour)
		hc := hours[h]
		hc.Hour = h
		if dec {
			c.Decisions++
			hc.Decisions++
		}
		if den {
			c.Denied++
			hc.Denied++
		}
		if o != "" {
			c.Outcomes[o]++
			if hc.Outcomes == nil {
				hc.Outcomes = map[string]int64{}
			}
			hc.Outcomes[o]++
		}
		if (dec || den || o != "") && !h.Before(from) && !h.After(to) {
			hours[h] = hc
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, hours
}

// Issue 16, "reads independent of store size": Counters and Series read
// every audit record to count decisions and outcomes. They now read
// counter rows that the appending transactions keep; after concurrent
// writers, rolled-back transactions and records of every kind over
// several hours they equal a full recount, and no statement they send
// reads the audit table.
func TestPostgresCountersEqualARecountWithoutReadingTheAudit(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{MaxBatchSize: 4})
	base := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	replay := &triage.Decision{ProposedAction: triage.AutoReplay}
	kinds := []audit.Record{
		{Kind: audit.KindDecision, Decision: replay, Action: triage.AutoReplay},                                         // a decision
		{Kind: audit.KindDecision, Decision: replay, Action: triage.Quarantine},                                         // decision, denied
		{Kind: audit.KindDecision, Decision: replay, Action: triage.Skip},                                               // neither
		{Kind: audit.KindDecision, Decision: &triage.Decision{ProposedAction: triage.Quarantine}, Action: "quarantine"}, // neither
		{Kind: audit.KindDispatch, Action: triage.AutoReplay},
		{Kind: audit.KindOutcome, Outcome: "succeeded"},
		{Kind: audit.KindOutcome, Outcome: "failed"},
	}
	errRollback := errors.New("roll back")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				err := p.Update(ctx, func(tx store.Tx) error {
					// Two records a transaction, in hours 0..4.
					for j := range 2 {
						r := kinds[(w+i+j)%len(kinds)]
						r.Actor, r.EntryRef = "ops", fmt.Sprintf("jsonl:w%d-%d", w, i)
						r.Time = base.Add(time.Duration((w*40+i)%5)*time.Hour + time.Duration(j)*time.Minute)
						if _, err := tx.Append(&r); err != nil {
							return err
						}
					}
					if i%7 == 3 {
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
	from, to := base.Add(time.Hour), base.Add(3*time.Hour)
	want, wantHours := recount(t, p, from, to)
	if want.Decisions == 0 || want.Denied == 0 || len(want.Outcomes) != 2 || len(wantHours) != 3 {
		t.Fatalf("the run did not mix records: %+v over %d hours", want, len(wantHours))
	}

	// Only what Counters and Series send is counted: the sealer, which
	// reads the audit table by design, is stopped first.
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
	after := p.Trips()
	readsAudit := regexp.MustCompile(`\baudit\b`)
	for sql, n := range after.ByStatement {
		if n > before.ByStatement[sql] && readsAudit.MatchString(sql) {
			t.Errorf("Counters or Series read the audit table: %s", sql)
		}
	}

	if got.Decisions != want.Decisions || got.Denied != want.Denied || !reflect.DeepEqual(got.Outcomes, want.Outcomes) {
		t.Errorf("counters: decisions %d denied %d outcomes %v; recount: %d %d %v",
			got.Decisions, got.Denied, got.Outcomes, want.Decisions, want.Denied, want.Outcomes)
	}
	gotHours := map[time.Time]store.HourCount{}
	for _, h := range series {
		h.Inflow, h.Drained = 0, 0
		if h.Decisions != 0 || h.Denied != 0 || len(h.Outcomes) > 0 {
			gotHours[h.Hour.UTC()] = h
		}
	}
	for h, hc := range gotHours {
		hc.Hour = h
		gotHours[h] = hc
	}
	if !reflect.DeepEqual(gotHours, wantHours) {
		t.Errorf("series: %+v\nrecount: %+v", gotHours, wantHours)
	}

	// A store written before the counters existed gets them from its
	// records when migrated.
	if _, err := p.pool.Exec(ctx, `DELETE FROM audit_counts`); err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error { return backfillCounts(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Counters(ctx); err != nil || got.Decisions != want.Decisions || got.Denied != want.Denied || !reflect.DeepEqual(got.Outcomes, want.Outcomes) {
		t.Errorf("backfilled counters: %+v (%v); recount %+v", got, err, want)
	}
}
