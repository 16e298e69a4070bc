package maintenance

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// TestPruneOnce: serve's scheduled prune reads the retention from the
// rules file as it is at that moment, archives into a new file in the
// directory, and leaves a chain that verifies with the archive.
func TestPruneOnce(t *testing.T) {
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for i, age := range []time.Duration{40 * 24 * time.Hour, 20 * 24 * time.Hour, time.Hour} {
		at := now.Add(-age)
		e := entry.Entry{ID: string(rune('a' + i)), Source: "jsonl", IdempotencyKey: string(rune('a' + i))}
		if err := st.Update(context.Background(), func(tx store.Tx) error {
			if err := tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusReplayed, FirstSeen: at, LastSeen: at}); err != nil {
				return err
			}
			_, err := tx.Append(&audit.Record{Time: at, Actor: "t", Kind: audit.KindDecision, EntryRef: e.Ref()})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("version: v1\nretention:\n  closed: 30d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archives := filepath.Join(dir, "archives")
	if err := os.Mkdir(archives, 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := PruneOnce(context.Background(), st, rules, archives, nil, now)
	if err != nil || res.Entries != 1 || res.Audit != 1 {
		t.Fatalf("30d: %+v %v", res, err)
	}
	// The retention is read again: 10d now lets the 20-day-old entry go.
	if err := os.WriteFile(rules, []byte("version: v1\nretention:\n  closed: 10d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res2, err := PruneOnce(context.Background(), st, rules, archives, nil, now.Add(time.Second))
	if err != nil || res2.Entries != 1 || res2.Archive == res.Archive {
		t.Fatalf("10d: %+v %v", res2, err)
	}
	files, _ := filepath.Glob(filepath.Join(archives, "*.jsonl.gz"))
	if len(files) != 2 {
		t.Fatalf("archives %v", files)
	}
	var rs []*os.File
	for _, f := range []string{res.Archive, res2.Archive} {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		rs = append(rs, fh)
	}
	v, err := audit.VerifyArchived(context.Background(), []io.Reader{rs[0], rs[1]}, st, audit.VerifyOptions{})
	if err != nil || !v.OK() || v.Records != 3 {
		t.Fatalf("verify: %+v %v", v, err)
	}
	// A rules file that does not load prunes nothing.
	if err := os.WriteFile(rules, []byte("version: v9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := PruneOnce(context.Background(), st, rules, archives, nil, now.Add(2*time.Second)); err == nil {
		t.Fatal("a broken rules file pruned")
	}
}

// The retention duty prunes on its tick with the rules' retention, logs
// what it archived, and a round on a rules file that does not load fails
// (counted, named) and prunes nothing.
func TestRetentionDutyPrunesOnTick(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	at := now.Add(-40 * 24 * time.Hour)
	e := entry.Entry{ID: "old", Source: "jsonl", IdempotencyKey: "old"}
	if err := st.Update(ctx, func(tx store.Tx) error {
		return tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusResolved, FirstSeen: at, LastSeen: at})
	}); err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("version: v9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archives := t.TempDir()
	before := runtime.NumGoroutine()
	ticks := newManualTicks()
	p, err := NewRetention(st, Retention{Rules: rules, Dir: archives}, Options{Every: time.Hour, Tick: ticks.tick, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ticks.fire(t)
	if s := waitRuns(t, p, 1); s.Errors != 1 || !strings.Contains(s.LastErr, "rules") {
		t.Fatalf("a round on a broken rules file: %+v", s)
	}
	if files, _ := filepath.Glob(filepath.Join(archives, "*")); len(files) != 0 {
		t.Fatalf("a failed round wrote %v", files)
	}
	if err := os.WriteFile(rules, []byte("version: v1\nretention:\n  closed: 30d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ticks.fire(t)
	if s := waitRuns(t, p, 2); s.Errors != 1 || s.LastErr != "" {
		t.Fatalf("a round after the fix: %+v", s)
	}
	p.Stop()
	goroutinesBack(t, before)
	files, _ := filepath.Glob(filepath.Join(archives, "*.jsonl.gz"))
	if len(files) != 1 {
		t.Fatalf("archives %v, want one", files)
	}
	if err := st.View(ctx, func(tx store.Tx) error {
		er, err := tx.Entry(e.Ref())
		if err == nil && er != nil {
			t.Errorf("the 40-day-old closed entry is still stored")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
