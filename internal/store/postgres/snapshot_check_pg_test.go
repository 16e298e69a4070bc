package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

// On PostgreSQL too, a snapshot whose stored text was changed breaks
// verification at the first record that refers to it.
func TestPostgresAuditVerifyFindsAChangedSnapshot(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	snap := triage.NewSnapshot(triage.SourceFile{Name: "rules.yaml", Text: "rules: []\n"},
		[]triage.SourceFile{{Name: "replay.rego", Text: "package replayctl\n\ndefault action := \"auto_replay\"\n"}})
	if err := p.PutSnapshot(ctx, snap.ID, snap); err != nil {
		t.Fatal(err)
	}
	for i, ref := range []string{"jsonl:a", "jsonl:b", "jsonl:c"} {
		r := &audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: ref}
		if i > 0 {
			r.PolicySnapshot = snap.ID
		}
		if err := p.Update(ctx, func(tx store.Tx) error { _, err := tx.Append(r); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := audit.Verify(ctx, p, nil); err != nil || !res.OK() || res.Records != 3 {
		t.Fatalf("intact: %+v %v", res, err)
	}
	if _, err := p.pool.Exec(ctx, `UPDATE snapshots SET body = convert_to(replace(convert_from(body, 'UTF8'), 'auto_replay', 'quarantine'), 'UTF8') WHERE id = $1`, snap.ID); err != nil {
		t.Fatal(err)
	}
	res, err := audit.Verify(ctx, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || res.Break.Seq != 2 || !strings.Contains(res.Break.Reason, "policy snapshot "+snap.ID) {
		t.Fatalf("a changed snapshot: %+v", res)
	}
}

// Review finding 3 on PostgreSQL: a snapshot deleted from the store fails
// verification at the first record naming it, with their count.
func TestPostgresAuditVerifyFindsADeletedSnapshot(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	snap := triage.NewSnapshot(triage.SourceFile{Name: "rules.yaml", Text: "rules: []\n"}, nil)
	// A record before any snapshot was kept (an older version's): its
	// snapshot was never stored, and that is no error.
	old := &audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: "jsonl:old", PolicySnapshot: "sha256:never-kept"}
	if err := p.Update(ctx, func(tx store.Tx) error { _, err := tx.Append(old); return err }); err != nil {
		t.Fatal(err)
	}
	if err := p.PutSnapshot(ctx, snap.ID, snap); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"jsonl:a", "jsonl:b"} {
		r := &audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: ref, PolicySnapshot: snap.ID}
		if err := p.Update(ctx, func(tx store.Tx) error { _, err := tx.Append(r); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := audit.Verify(ctx, p, nil); err != nil || !res.OK() || res.Records != 3 {
		t.Fatalf("intact: %+v %v", res, err)
	}
	// The marker row is the store's, not a snapshot: asking for it by its
	// id (GET /api/snapshots/{id}) is "not found", not a decode error.
	var v map[string]any
	if err := p.Snapshot(ctx, pgSnapshotsKeptFrom, &v); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the marker read as a snapshot: %v", err)
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM snapshots WHERE id = $1`, snap.ID); err != nil {
		t.Fatal(err)
	}
	res, err := audit.Verify(ctx, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || res.Break == nil || res.Break.Seq != 2 || res.MissingSnapshots != 2 || !strings.Contains(res.Break.Reason, "deleted") {
		t.Fatalf("a deleted snapshot: %+v", res)
	}
}
