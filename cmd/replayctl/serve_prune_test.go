package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
)

// TestServePruneOnce: serve's scheduled prune reads the retention from the
// rules file as it is at that moment, archives into a new file in the
// directory, and leaves a chain that verifies with the archive.
func TestServePruneOnce(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenBolt(filepath.Join(dir, "replayctl.db"), store.Options{})
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
	res, err := pruneOnce(context.Background(), st, rules, archives, nil, now)
	if err != nil || res.Entries != 1 || res.Audit != 1 {
		t.Fatalf("30d: %+v %v", res, err)
	}
	// The retention is read again: 10d now lets the 20-day-old entry go.
	if err := os.WriteFile(rules, []byte("version: v1\nretention:\n  closed: 10d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res2, err := pruneOnce(context.Background(), st, rules, archives, nil, now.Add(time.Second))
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
	if _, err := pruneOnce(context.Background(), st, rules, archives, nil, now.Add(2*time.Second)); err == nil {
		t.Fatal("a broken rules file pruned")
	}
}
