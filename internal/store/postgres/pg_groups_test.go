package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

// A database at schema version 14 (no groups) is migrated to 15 when a
// newer replayctl opens it: the group column and counters are backfilled
// from the records, so the groups count what a scan of the entries finds.
func TestPostgresMigratesGroups(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	old := openPG(t, dsn, store.Options{})
	var recs []*store.EntryRecord
	for i := range 30 {
		recs = append(recs, &store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("m%02d", i), Source: "cordum", Topic: []string{"orders", "payments"}[i%2],
			IdempotencyKey: fmt.Sprintf("mk%d", i), ReasonCode: "TIMEOUT", Message: fmt.Sprintf("upstream %d timed out after %dms", i, i*10)},
			Status: []string{store.StatusPending, store.StatusReplayed, store.StatusQuarantined}[i%3], Class: triage.Transient, FirstSeen: base.Add(time.Duration(i) * 7 * time.Minute)})
	}
	if _, err := old.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := old.pool.Exec(ctx, `DROP TABLE entry_groups; DROP INDEX entries_grp; ALTER TABLE entries DROP COLUMN grp;
		DELETE FROM entry_counts WHERE dim IN ('group', 'gopen', 'ginflow');
		DELETE FROM schema_migrations WHERE version = 15`); err != nil {
		t.Fatal(err)
	}
	old.Close()

	p := openPG(t, dsn, store.Options{})
	now := base.Add(2 * time.Hour)
	gs, err := p.Groups(ctx, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{}
	for _, r := range recs {
		w := want[store.GroupID(r)]
		w[0]++
		if store.IsOpen(r.Status) {
			w[1]++
		}
		want[store.GroupID(r)] = w
	}
	if len(gs) != len(want) || len(want) != 2 {
		t.Fatalf("%d groups after the migration, want %d (2)", len(gs), len(want))
	}
	for _, g := range gs {
		if w := want[g.ID]; g.Total != w[0] || g.Open != w[1] || g.LastDay == 0 || g.Sample == "" {
			t.Errorf("group %s: %+v, want total %d open %d", g.ID, g, w[0], w[1])
		}
	}
}
