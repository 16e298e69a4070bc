package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// writeUnindexed writes a store with this code, then takes it back to the
// layout replayctl wrote before indexes existed: no idx, counters or
// sigmeta bucket, no index_version, and one entry with its payload inline
// (payload_bytes, as the first bbolt files kept it).
func writeUnindexed(t *testing.T, path string) *store.Counters {
	t.Helper()
	ctx := context.Background()
	s, err := Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)
	if err := s.Update(ctx, func(tx store.Tx) error {
		for i := 0; i < 12; i++ {
			st := []string{store.StatusPending, store.StatusReplayed, store.StatusAwaitingApproval}[i%3]
			r := &store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("m%d", i), Source: "jsonl", Topic: []string{"a", "b"}[i%2],
				Message: fmt.Sprintf("timeout %d", i), Payload: []byte(fmt.Sprintf(`{"i": %d}`, i))},
				Status: st, Class: triage.Transient, Action: triage.AutoReplay, FirstSeen: base.Add(time.Duration(i) * time.Hour)}
			if err := tx.PutEntry(r); err != nil {
				return err
			}
			if _, err := tx.Append(&audit.Record{Kind: audit.KindDecision, EntryRef: r.Entry.Ref(),
				Decision: &triage.Decision{ProposedAction: triage.AutoReplay}, Action: []triage.Action{triage.AutoReplay, triage.RequireApproval}[i%2]}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want, err := s.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketIdx, bucketCounters, bucketSigMeta} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketMeta).Delete(keyIndexVer); err != nil {
			return err
		}
		// The inline payload of an older file.
		k := []byte("jsonl:m0")
		var se store.StoredEntry
		if err := store.DecodeValue(tx.Bucket(bucketEntries).Get(k), &se); err != nil {
			return err
		}
		se.PayloadBytes = []byte(`{"i":  0, "inline": true}`)
		if err := putJSON(tx.Bucket(bucketEntries), k, &se); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPayloadsZ).Delete(k); err != nil {
			return err
		}
		return tx.Bucket(bucketPayloads).Delete(k)
	}); err != nil {
		t.Fatal(err)
	}
	return want
}

func TestUnindexedFileIsIndexedOnceOnOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "replayctl.db")
	want := writeUnindexed(t, path)

	// Read-only (dlq list, stats) cannot build them: callers fall back.
	ro, err := Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Page(ctx, store.EntryFilter{}, "", 5); !errors.Is(err, store.ErrNotIndexed) {
		t.Fatalf("read-only page of an unindexed file: %v, want ErrNotIndexed", err)
	}
	if _, err := ro.Counters(ctx); !errors.Is(err, store.ErrNotIndexed) {
		t.Fatalf("read-only counters of an unindexed file: %v, want ErrNotIndexed", err)
	}
	ro.Close()

	s, err := Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("counters after migration\n got %+v\nwant %+v", got, want)
	}
	if got.Decisions != 12 || got.Denied != 6 {
		t.Fatalf("decisions %d denied %d, want 12 6", got.Decisions, got.Denied)
	}
	p, err := s.Page(ctx, store.EntryFilter{States: []string{store.StatusPending}}, "", 10)
	if err != nil || len(p.Items) != 4 || !p.TotalExact || p.Total != 4 {
		t.Fatalf("page after migration: %+v %v", p, err)
	}
	// The inline payload moved to the payloads bucket, byte for byte.
	var er *store.EntryRecord
	if err := s.View(ctx, func(tx store.Tx) error { er, err = tx.Entry("jsonl:m0"); return err }); err != nil {
		t.Fatal(err)
	}
	if string(er.Entry.Payload) != `{"i":  0, "inline": true}` {
		t.Fatalf("payload %q", er.Entry.Payload)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		var se store.StoredEntry
		if err := store.DecodeValue(tx.Bucket(bucketEntries).Get([]byte("jsonl:m0")), &se); err != nil {
			return err
		}
		if se.PayloadBytes != nil {
			return errors.New("the entry record still carries its payload inline")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The audit chain was indexed by entry as well.
	var seqs []uint64
	if err := s.EntryAudit(ctx, "jsonl:m3", "", func(seq uint64, _ audit.Sealed, derr error) error {
		seqs = append(seqs, seq)
		return derr
	}); err != nil || len(seqs) != 1 || seqs[0] != 4 {
		t.Fatalf("audit of jsonl:m3 after migration: %v %v", seqs, err)
	}
	if refs, err := s.RefsByID(ctx, "m5"); err != nil || len(refs) != 1 || refs[0] != "jsonl:m5" {
		t.Fatalf("by id after migration: %v %v", refs, err)
	}
	// Mark the counters: a second open must not rebuild them.
	if err := s.db.Update(func(tx *bolt.Tx) error { return addCount(tx.Bucket(bucketCounters), []byte("n"), 1000) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, err := s.Counters(ctx); err != nil || c.Entries != 1012 {
		t.Fatalf("second open rebuilt the indexes (entries %d, %v)", c.Entries, err)
	}
}

// A migration cut short (no index_version) starts over from empty
// buckets: whatever it left is not counted twice.
func TestInterruptedIndexingStartsOver(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "replayctl.db")
	want := writeUnindexed(t, path)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketCounters)
		if err != nil {
			return err
		}
		return addCount(b, []byte("n"), 7)
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("counters\n got %+v\nwant %+v", got, want)
	}
}

func TestPendingApprovalsComeFromTheirIndex(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	base := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	put := func(a *store.Approval) {
		t.Helper()
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutApproval(a) }); err != nil {
			t.Fatal(err)
		}
	}
	put(&store.Approval{ID: "a-new", State: store.ApprovalPending, ApproverGroup: "ops", RequestedAt: base.Add(time.Hour)})
	put(&store.Approval{ID: "a-old", State: store.ApprovalPending, ApproverGroup: "ops", RequestedAt: base})
	put(&store.Approval{ID: "a-done", State: store.ApprovalApproved, RequestedAt: base.Add(-time.Hour)})
	put(&store.Approval{ID: "a-mid", State: store.ApprovalPending, ApproverGroup: "sec", RequestedAt: base.Add(30 * time.Minute)})
	put(&store.Approval{ID: "a-mid", State: store.ApprovalRejected, ApproverGroup: "sec", RequestedAt: base.Add(30 * time.Minute)})
	pending := func(s *Bolt) []string {
		t.Helper()
		var ids []string
		if err := s.PendingApprovals(ctx, func(a *store.Approval) error { ids = append(ids, a.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got := pending(s); !reflect.DeepEqual(got, []string{"a-old", "a-new"}) {
		t.Fatalf("pending %v, want a-old a-new", got)
	}
	// Indexed again from the approvals themselves on a file without it.
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketIdx); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(keyIndexVer)
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s2, err := Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := pending(s2); !reflect.DeepEqual(got, []string{"a-old", "a-new"}) {
		t.Fatalf("pending after reindexing %v", got)
	}
}

// An entry whose ref is too long to sit in an index key beside a value is
// indexed under its hash and still listed, found and moved (issue 14 made
// such refs legal).
func TestLongRefsAreIndexed(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	long := strings.Repeat("x", 5000)
	put := func(r *store.EntryRecord) {
		t.Helper()
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(r) }); err != nil {
			t.Fatal(err)
		}
	}
	r := &store.EntryRecord{Entry: entry.Entry{ID: long, Source: "jsonl", Topic: "t"}, Status: store.StatusPending, FirstSeen: time.Now()}
	put(r)
	put(&store.EntryRecord{Entry: entry.Entry{ID: "short", Source: "jsonl", Topic: "t"}, Status: store.StatusPending, FirstSeen: time.Now()})
	var got []string
	cursor := ""
	for {
		p, err := s.Page(ctx, store.EntryFilter{States: []string{store.StatusPending}, Topic: "t"}, cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			got = append(got, it.Entry.ID)
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if len(got) != 2 || (got[0] != long && got[1] != long) {
		t.Fatalf("pages: %d items", len(got))
	}
	if refs, err := s.RefsByID(ctx, long); err != nil || len(refs) != 1 || refs[0] != r.Entry.Ref() {
		t.Fatalf("by id: %d refs %v", len(refs), err)
	}
	r.Status = store.StatusReplayed
	put(r)
	p, err := s.Page(ctx, store.EntryFilter{States: []string{store.StatusReplayed}}, "", 5)
	if err != nil || len(p.Items) != 1 || p.Items[0].Entry.ID != long || p.Total != 1 {
		t.Fatalf("after the move: %+v %v", p, err)
	}
	if p, _ := s.Page(ctx, store.EntryFilter{States: []string{store.StatusPending}}, "", 5); len(p.Items) != 1 || p.Items[0].Entry.ID != "short" {
		t.Fatalf("pending after the move: %+v", p.Items)
	}
}
