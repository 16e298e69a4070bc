package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// TestPostgresEntryAuditReadsTheEntrysRecordsNotTheChain: on PostgreSQL an
// entry's history (dlq show, the console's audit page of an entry) read
// the whole audit chain (AuditRange from 1: every record ever written,
// for each show). EntryAudit reads the entry's own records from
// the owner index (audit_owner_col): for every entry, its records by ref and the records naming
// only its key, oldest first, exactly those a scan of the chain keeps
// (the rule of Show's filter and of bbolt's index), through an index
// condition. Records whose body the index cannot read as JSON text (a
// NUL in the ref, which jsonb refuses) are appended all the same and
// found too.
func TestPostgresEntryAuditReadsTheEntrysRecordsNotTheChain(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	type owner struct{ ref, key string }
	owners := []owner{{"jsonl:a", "k-a"}, {"jsonl:b", "k-b"}, {"cordum:" + strings.Repeat("c", 3000), "k-c"},
		{"jsonl:n\x00ul", "k-nul"}, {"jsonl:d", ""}, {"nexora:e", strings.Repeat("k", 3000)}}
	if err := p.Update(ctx, func(tx store.Tx) error {
		for i := range 120 {
			o := owners[i%len(owners)]
			r := &audit.Record{Kind: audit.KindDecision, Actor: "test", EntryRef: o.ref, Key: o.key, Reason: fmt.Sprintf("r%d", i)}
			switch i % 5 {
			case 1: // a record naming only the key (a ledger write)
				r.EntryRef = ""
			case 2:
				r.Reason = "a NUL \x00 in another field"
			}
			if _, err := tx.Append(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var chain []audit.Record
	if err := p.AuditRange(ctx, 1, func(_ uint64, s audit.Sealed, derr error) error {
		r, err := s.Open()
		if derr != nil || err != nil {
			t.Fatalf("record %d: %v %v", s.Seq, derr, err)
		}
		chain = append(chain, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(chain) != 120 {
		t.Fatalf("%d records in the chain, want 120", len(chain))
	}
	p.stopSealer()
	p.stopSealer = nil
	before := p.Trips()
	for _, o := range owners {
		var want, got []uint64
		for _, r := range chain {
			if r.EntryRef == o.ref || (r.EntryRef == "" && o.key != "" && r.Key == o.key) {
				want = append(want, r.Seq)
			}
		}
		if err := p.EntryAudit(ctx, o.ref, o.key, func(seq uint64, s audit.Sealed, derr error) error {
			if _, err := s.Open(); derr != nil || err != nil || s.Seq != seq || s.Hash == "" {
				t.Errorf("record %d: %v %v, hash %q", seq, derr, err, s.Hash)
			}
			got = append(got, seq)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%.20q: got %v\nwant %v", o.ref, got, want)
		}
	}
	var sent []string
	for sql, k := range p.Trips().ByStatement {
		if k > before.ByStatement[sql] && strings.Contains(sql, "where owner = any") {
			sent = append(sent, sql)
		}
	}
	if len(sent) == 0 {
		t.Fatal("no statement read the audit owner index")
	}
	assertIndexBounded(t, p, sent)
	// Its exception block cannot run in a parallel worker (a parallel
	// build of the index on a large audit table failed).
	var par string
	if err := p.pool.QueryRow(ctx, `SELECT proparallel FROM pg_proc WHERE proname = 'replayctl_audit_owner'`).Scan(&par); err != nil || par != "u" {
		t.Errorf("replayctl_audit_owner is parallel %q (%v), want unsafe", par, err)
	}
}
