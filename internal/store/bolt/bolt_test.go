package bolt

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
)

func openTemp(t *testing.T) (*Bolt, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replayctl.db")
	s, err := Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestSecondOpenNamesTheHolder(t *testing.T) {
	_, path := openTemp(t)
	_, err := Open(path, store.Options{LockTimeout: 50 * time.Millisecond})
	var inUse *InUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("got %v, want *InUseError", err)
	}
	if inUse.PID != os.Getpid() {
		t.Fatalf("pid = %d, want %d", inUse.PID, os.Getpid())
	}
	want := path + " is in use by pid "
	if got := err.Error(); len(got) < len(want) || got[:len(want)] != want ||
		got[len(got)-len("--server URL --token T)"):] != "--server URL --token T)" {
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
	if err := s.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Transition(idempotency.Transition{Key: "k", To: idempotency.Decided})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	before, st := fileSum(t, path), mustStat(t, path)
	ro, err := Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	v, err := ro.LedgerView(ctx, "k")
	if err != nil || v.State != "decided" {
		t.Fatalf("view %+v err %v", v, err)
	}
	if err := ro.Update(ctx, func(store.Tx) error { return nil }); !errors.Is(err, store.ErrReadOnly) {
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
