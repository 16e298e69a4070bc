package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
)

func openTemp(t *testing.T) (*Bolt, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replayctl.db")
	s, err := OpenBolt(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestSecondOpenNamesTheHolder(t *testing.T) {
	_, path := openTemp(t)
	_, err := OpenBolt(path, Options{LockTimeout: 50 * time.Millisecond})
	var inUse *InUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("got %v, want *InUseError", err)
	}
	if inUse.PID != os.Getpid() {
		t.Fatalf("pid = %d, want %d", inUse.PID, os.Getpid())
	}
	want := path + " is in use by pid "
	if got := err.Error(); len(got) < len(want) || got[:len(want)] != want {
		t.Fatalf("message %q", got)
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestReadOnlyOpenChangesNothing(t *testing.T) {
	s, path := openTemp(t)
	ctx := context.Background()
	if err := s.Update(ctx, func(tx Tx) error {
		_, err := tx.Transition(idempotency.Transition{Key: "k", To: idempotency.Decided})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	before, st := fileSum(t, path), mustStat(t, path)
	ro, err := OpenBolt(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	v, err := ro.LedgerView(ctx, "k")
	if err != nil || v.State != "decided" {
		t.Fatalf("view %+v err %v", v, err)
	}
	if err := ro.Update(ctx, func(Tx) error { return nil }); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("update on read-only: %v", err)
	}
	ro.Close()
	if fileSum(t, path) != before || !mustStat(t, path).ModTime().Equal(st.ModTime()) {
		t.Fatal("read-only open changed the file")
	}
	if _, err := os.Stat(pidPath(path)); !os.IsNotExist(err) {
		t.Fatal("read-only open left a pid file")
	}
}

func mustStat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestFailedUpdateWritesNothing(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: "k", To: idempotency.Decided}); err != nil {
			return err
		}
		if _, err := tx.Append(&audit.Record{Kind: audit.KindDecision, Key: "k"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	v, _ := s.LedgerView(ctx, "k")
	seq, head, _ := s.AuditHead(ctx)
	if v.State != "" || seq != 0 || head != audit.Genesis {
		t.Fatalf("rolled-back update left state: view %+v audit %d %s", v, seq, head)
	}
}

func TestConcurrentCompareAndSetHasOneWinner(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	if err := s.Update(ctx, func(tx Tx) error {
		_, err := tx.Transition(idempotency.Transition{Key: "k", To: idempotency.Decided})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(ctx, func(tx Tx) error {
				_, err := tx.Transition(idempotency.Transition{Key: "k", From: idempotency.Decided, To: idempotency.Dispatching})
				return err
			})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, idempotency.ErrConflict):
				conflicts.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != 15 {
		t.Fatalf("wins %d conflicts %d, want 1 and 15", wins.Load(), conflicts.Load())
	}
}

func TestAuditChainAppendsAndVerifies(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Update(ctx, func(tx Tx) error {
				_, err := tx.Append(&audit.Record{Kind: audit.KindDecision, EntryRef: "jsonl:" + string(rune('a'+i))})
				return err
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	v := audit.NewVerifier()
	if err := s.AuditRange(ctx, 1, func(k uint64, rec audit.Sealed, derr error) error {
		if derr != nil {
			return derr
		}
		if b := v.Next(k, rec); b != nil {
			return b
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	seq, head, _ := s.AuditHead(ctx)
	if v.Count() != 20 || seq != 20 || head != v.Head() {
		t.Fatalf("count %d seq %d head match %v", v.Count(), seq, head == v.Head())
	}
}

func TestEntriesRoundTrip(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	e := entry.Entry{ID: "j1", Source: entry.KindCordum, Payload: []byte(`{"a": 1}`), Labels: map[string]string{"risk": "high"}}
	e.EnsureKey()
	if err := s.Update(ctx, func(tx Tx) error {
		return tx.PutEntry(&EntryRecord{Entry: e, Status: StatusPending})
	}); err != nil {
		t.Fatal(err)
	}
	var got []*EntryRecord
	if err := s.Entries(ctx, func(r *EntryRecord) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Entry.Payload) != `{"a": 1}` || got[0].Entry.IdempotencyKey != e.IdempotencyKey {
		t.Fatalf("got %+v", got)
	}
}
