package bolt

import (
	"context"
	"errors"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

func appendOne(s store.Backend) error {
	return s.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.Append(&audit.Record{Actor: "mallory", Kind: audit.KindDecision, EntryRef: "jsonl:x", Action: "auto_replay"})
		return err
	})
}

// Issue 14: a signed store accepted appends from a process without the
// key; the unsigned head then made the legitimate chain look tampered with
// and let anyone drop that tail. Such a writer is refused and the chain
// stays valid under the key.
func TestSignedBoltRefusesKeylessWriter(t *testing.T) {
	key := []byte("k1")
	path := chainFile(t, 2, key)
	s, err := Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := appendOne(s); !errors.Is(err, store.ErrAuditKeyRequired) {
		t.Fatalf("keyless append to a signed chain: %v, want ErrAuditKeyRequired", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if res := verifyFile(t, path, key); !res.OK() || !res.Signed || res.Records != 2 {
		t.Fatalf("after the refused write: %+v", res)
	}
	// A store never signed still takes keyless writers.
	plain := chainFile(t, 1, nil)
	s, err = Open(plain, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := appendOne(s); err != nil {
		t.Fatalf("keyless append to an unsigned chain: %v", err)
	}
}
