package store

import (
	"context"
	"errors"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/testsvc"
)

func appendOne(s Backend) error {
	return s.Update(context.Background(), func(tx Tx) error {
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
	s, err := OpenBolt(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := appendOne(s); !errors.Is(err, ErrAuditKeyRequired) {
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
	s, err = OpenBolt(plain, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := appendOne(s); err != nil {
		t.Fatalf("keyless append to an unsigned chain: %v", err)
	}
}

func TestSignedPostgresRefusesKeylessWriter(t *testing.T) {
	dsn := testsvc.Postgres(t)
	ctx := context.Background()
	signed, err := OpenPostgres(ctx, dsn, Options{AuditKey: []byte("k1")})
	if err != nil {
		t.Fatal(err)
	}
	defer signed.Close()
	if err := appendOne(signed); err != nil {
		t.Fatal(err)
	}
	keyless, err := OpenPostgres(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer keyless.Close()
	if err := appendOne(keyless); !errors.Is(err, ErrAuditKeyRequired) {
		t.Fatalf("keyless append to a signed chain: %v, want ErrAuditKeyRequired", err)
	}
	res, err := audit.Verify(ctx, signed, []byte("k1"))
	if err != nil || !res.OK() || !res.Signed {
		t.Fatalf("after the refused write: %+v %v", res, err)
	}
}
