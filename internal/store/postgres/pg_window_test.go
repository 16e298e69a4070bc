package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// Issue 16, windows on the shared store: a worker writes the intents (or
// outcomes) of several claimed entries in one transaction, each part
// under its own claim. The claims are checked together, in one round
// trip (two statements: the entries, then the ledger rows); a claim no
// longer current is reported for its part alone, which writes nothing,
// while the others commit. The audit records' numbers are taken in the
// same round trip, one per part. Counted from the store's trace, not
// timed.
func TestPostgresWindowChecksEachPartsOwnClaimInOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	var recs []*store.EntryRecord
	for i := 1; i <= 3; i++ {
		recs = append(recs, &store.EntryRecord{Entry: entry.Entry{ID: fmt.Sprintf("e%d", i), Source: "jsonl",
			IdempotencyKey: fmt.Sprintf("k%d", i), Payload: []byte(`{"n":1}`)}, Status: store.StatusPending})
	}
	if _, err := p.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	var fences []store.Fence
	for _, r := range recs {
		c, ok, err := p.ClaimRef(ctx, r.Entry.Ref(), "w0", time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim %s: %v %v", r.Entry.Ref(), ok, err)
		}
		fences = append(fences, store.Fence{Ref: r.Entry.Ref(), Token: c.Token, Key: r.Entry.IdempotencyKey})
	}
	// The second entry's claim was taken over: another worker claimed it
	// after this one's lease, so its token is no longer current.
	if _, err := p.pool.Exec(ctx, `UPDATE entries SET lease_until = now() - interval '1 second' WHERE ref = $1`, pgKey(fences[1].Ref)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := p.ClaimRef(ctx, fences[1].Ref, "w1", time.Minute); err != nil || !ok {
		t.Fatalf("take over %s: %v %v", fences[1].Ref, ok, err)
	}
	before := p.Trips()
	var stale []error
	err := p.Update(ctx, func(tx store.Tx) error {
		w := tx.(*pgTx)
		var err error
		if stale, err = w.CheckFences(fences); err != nil {
			return err
		}
		for i, f := range fences {
			if stale[i] != nil {
				continue
			}
			if err := w.UnderFence(f, func(tx store.Tx) error {
				if _, err := tx.Transition(idempotency.Transition{Key: f.Key, To: idempotency.Decided, EntryRef: f.Ref}); err != nil {
					return err
				}
				_, err := tx.Append(&audit.Record{Actor: "w0", Kind: audit.KindDecision, EntryRef: f.Ref, Key: f.Key})
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after := p.Trips()
	if stale[0] != nil || stale[2] != nil || !errors.Is(stale[1], store.ErrStaleFence) {
		t.Fatalf("claims found stale: %v, want only the second", stale)
	}
	var reads, numbering int64
	for sql, n := range after.ByStatement {
		if strings.Contains(sql, "from ledger") || strings.Contains(sql, "from entries") {
			reads += n - before.ByStatement[sql]
		}
		if strings.Contains(sql, "nextval('audit_seq')") {
			numbering += n - before.ByStatement[sql]
		}
	}
	// Numbered one by one: a round trip per record. The numbers are
	// taken with the fence checks, one per part.
	if numbering != 1 {
		t.Errorf("%d statements numbered the window's audit records, want 1", numbering)
	}
	// Checked one by one: 3 statements, each its own round trip.
	if reads != 2 {
		t.Errorf("%d statements read the entries and ledger rows of 3 claims, want 2", reads)
	}
	if c := after.Commits - before.Commits; c != 1 {
		t.Errorf("%d commits for the window's parts, want 1", c)
	}
	for i, f := range fences {
		v, err := p.LedgerView(ctx, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "", false: "decided"}[i == 1]; string(v.State) != want {
			t.Errorf("key %s: %q, want %q", f.Key, v.State, want)
		}
	}
	// The stale part's number (the last taken) is a gap once a later
	// record is written, which the sealer fills: the chain verifies, the
	// three records and one void.
	if err := p.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Append(&audit.Record{Actor: "w0", Kind: audit.KindDecision, EntryRef: "jsonl:later"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SealAudit(ctx, true); err != nil {
		t.Fatal(err)
	}
	res, err := audit.Verify(ctx, p, nil)
	if err != nil || !res.OK() || res.Records != 4 || res.Unsealed != 0 {
		t.Fatalf("verify: %+v %v", res, err)
	}
	kinds := map[string]int{}
	if err := audit.Each(ctx, p, audit.Query{}, func(r audit.Record) error {
		kinds[r.Kind]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if kinds[audit.KindDecision] != 3 || kinds[KindVoid] != 1 {
		t.Errorf("records by kind: %v, want 3 decisions and 1 void", kinds)
	}
	// Alone, the stale claim's part still writes nothing.
	if err := p.Update(ctx, func(tx store.Tx) error {
		return tx.(*pgTx).UnderFence(fences[1], func(tx store.Tx) error {
			_, err := tx.Transition(idempotency.Transition{Key: fences[1].Key, To: idempotency.Decided, EntryRef: fences[1].Ref})
			return err
		})
	}); !errors.Is(err, store.ErrStaleFence) {
		t.Fatalf("the stale claim's part alone: %v, want %v", err, store.ErrStaleFence)
	}
}
