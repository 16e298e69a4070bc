package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

func appendOne(s store.Backend) error {
	return s.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.Append(&audit.Record{Actor: "mallory", Kind: audit.KindDecision, EntryRef: "jsonl:x", Action: "auto_replay"})
		return err
	})
}

func TestSignedPostgresRefusesKeylessWriter(t *testing.T) {
	dsn := testsvc.Postgres(t)
	ctx := context.Background()
	signed, err := Open(ctx, dsn, store.Options{AuditKey: []byte("k1")})
	if err != nil {
		t.Fatal(err)
	}
	defer signed.Close()
	if err := appendOne(signed); err != nil {
		t.Fatal(err)
	}
	keyless, err := Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer keyless.Close()
	if err := appendOne(keyless); !errors.Is(err, store.ErrAuditKeyRequired) {
		t.Fatalf("keyless append to a signed chain: %v, want ErrAuditKeyRequired", err)
	}
	res, err := audit.Verify(ctx, signed, []byte("k1"))
	if err != nil || !res.OK() || !res.Signed {
		t.Fatalf("after the refused write: %+v %v", res, err)
	}
}
