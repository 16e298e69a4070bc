package audit_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// chain writes n records (actor names the chain, so two chains differ)
// into the bbolt file at path with key.
func chain(t *testing.T, path string, key []byte, actor string, n int) {
	t.Helper()
	s, err := bolt.Open(path, store.Options{AuditKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range n {
		if err := s.Update(context.Background(), func(tx store.Tx) error {
			_, err := tx.Append(&audit.Record{Actor: actor, Kind: audit.KindDecision, EntryRef: "jsonl:e", Action: "auto_replay"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func verify(t *testing.T, path string, o audit.VerifyOptions) (*audit.VerifyResult, error) {
	t.Helper()
	s, err := bolt.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return audit.VerifyWith(context.Background(), s, o)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Issue 14: rolling the file back to an older head (with that head's
// valid MAC) verified as valid. A checkpoint kept elsewhere catches it.
func TestCheckpointDetectsRollbackAndDivergence(t *testing.T) {
	key := []byte("k1")
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	old := filepath.Join(dir, "old.db")
	chain(t, live, key, "alice", 2)
	copyFile(t, live, old) // the attacker keeps this copy
	chain(t, live, key, "alice", 2)

	s, err := bolt.Open(live, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := audit.NewCheckpoint(context.Background(), s, key, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s.Close()
	if err != nil || cp.Seq != 4 || cp.MAC != audit.HeadMAC(key, 4, cp.Head) {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}

	// The chain grows after the checkpoint: still fine.
	chain(t, live, key, "alice", 1)
	if res, err := verify(t, live, audit.VerifyOptions{Key: key, Checkpoint: cp}); err != nil || !res.OK() || !res.Checkpoint || len(res.Unchecked) != 0 {
		t.Fatalf("a grown chain against its checkpoint: %+v %v", res, err)
	}

	// The rolled-back file verifies without the checkpoint (the hole) ...
	res, err := verify(t, old, audit.VerifyOptions{Key: key})
	if err != nil || !res.OK() || !res.Signed {
		t.Fatalf("old head with its own MAC: %+v %v", res, err)
	}
	if len(res.Unchecked) != 1 || !strings.Contains(res.Unchecked[0], "rollback") {
		t.Fatalf("the rollback check is not named as not made: %+v", res.Unchecked)
	}
	// ... and not with it.
	res, err = verify(t, old, audit.VerifyOptions{Key: key, Checkpoint: cp})
	if err != nil || res.OK() || !strings.Contains(res.Break.Reason, "fewer than the checkpoint's 4") {
		t.Fatalf("rolled-back chain against the checkpoint: %+v %v", res, err)
	}

	// Another chain of the same length and key diverges.
	other := filepath.Join(dir, "other.db")
	chain(t, other, key, "mallory", 5)
	res, err = verify(t, other, audit.VerifyOptions{Key: key, Checkpoint: cp})
	if err != nil || res.OK() || !strings.Contains(res.Break.Reason, "diverges from the checkpoint") || res.Break.Seq != 4 {
		t.Fatalf("diverging chain against the checkpoint: %+v %v", res, err)
	}

	// An edited checkpoint is refused under the key.
	bad := *cp
	bad.Seq = 2
	if _, err := verify(t, live, audit.VerifyOptions{Key: key, Checkpoint: &bad}); err == nil || !strings.Contains(err.Error(), "not signed with this key") {
		t.Fatalf("edited checkpoint: %v", err)
	}
}

// Without a key, verification says which check it could not make.
func TestVerifyNamesUncheckedSignature(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	chain(t, path, []byte("k1"), "alice", 1)
	res, err := verify(t, path, audit.VerifyOptions{})
	if err != nil || !res.OK() || res.Signed {
		t.Fatalf("%+v %v", res, err)
	}
	if len(res.Unchecked) != 2 || res.Unchecked[1] != audit.UncheckedSignature {
		t.Fatalf("unchecked %q", res.Unchecked)
	}
}
