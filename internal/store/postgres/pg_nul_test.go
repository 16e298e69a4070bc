package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// A NUL byte is valid UTF-8 and valid JSON (\u0000), so a DLQ can carry
// one in a message or a topic (a C producer's string, a binary header
// copied into the error). PostgreSQL's text columns and jsonb refuse it:
// before the fix the whole Ingest batch failed with "invalid byte sequence
// for encoding UTF8: 0x00" and the entries were never stored. Each entry
// must be stored, read back byte for byte, counted, listed and shown in
// the gauges, like any other.
func TestPostgresStoresEntriesWithNULBytes(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	base := time.Date(2026, 11, 20, 20, 0, 0, 0, time.UTC)
	var recs []*store.EntryRecord
	for i := range 6 {
		r := mixedEntry(i, base)
		switch i % 3 {
		case 0:
			r.Entry.Message = "upstream\x00said no"
		case 1:
			r.Entry.Topic = "orders\x00created"
		case 2:
			r.Entry.Source = "nul\x00src"
			r.Entry.State.ErrorSignature = "sig\x00x"
		}
		recs = append(recs, r)
	}
	if n, err := p.Ingest(ctx, recs); err != nil || n != len(recs) {
		t.Fatalf("ingest: %d, %v; want %d stored", n, err, len(recs))
	}
	for _, want := range recs {
		var got *store.EntryRecord
		if err := p.View(ctx, func(tx store.Tx) error {
			var err error
			got, err = tx.Entry(want.Entry.Ref())
			return err
		}); err != nil || got == nil {
			t.Fatalf("read %q: %v, %v", want.Entry.Ref(), got, err)
		}
		if got.Entry.Message != want.Entry.Message || got.Entry.Topic != want.Entry.Topic || got.Entry.Source != want.Entry.Source {
			t.Errorf("read back %q/%q/%q, stored %q/%q/%q", got.Entry.Message, got.Entry.Topic, got.Entry.Source,
				want.Entry.Message, want.Entry.Topic, want.Entry.Source)
		}
	}
	// A decision moves them (a write under a transaction, not Ingest),
	// with an audit record naming each.
	for _, r := range recs {
		changeEntry(t, p, r.Entry.Ref(), func(r *store.EntryRecord) { r.Status = store.StatusQuarantined })
		if _, err := appendRef(ctx, p, r.Entry.Ref()); err != nil {
			t.Fatalf("audit record of %q: %v", r.Entry.Ref(), err)
		}
	}
	if _, err := p.SealAudit(ctx, true); err != nil {
		t.Fatalf("seal: %v", err)
	}
	seen := 0
	if err := p.EntryAudit(ctx, recs[2].Entry.Ref(), recs[2].Entry.IdempotencyKey, func(_ uint64, rec audit.Sealed, decodeErr error) error {
		if decodeErr == nil {
			seen++
		}
		return decodeErr
	}); err != nil || seen != 1 {
		t.Errorf("an entry's history: %d record(s), %v; want its 1", seen, err)
	}

	if got := pagedRefs(t, p, store.EntryFilter{}); len(got) != len(recs) {
		t.Errorf("unfiltered pages list %d entries, want %d", len(got), len(recs))
	}
	if got := pagedRefs(t, p, store.EntryFilter{Topic: "orders*"}); len(got) == 0 {
		t.Error("a topic glob lists none of the entries whose topic has a NUL")
	}
	c, err := p.Counters(ctx)
	if err != nil {
		t.Fatalf("counters: %v", err)
	}
	// A facet's count and its link agree: each cell's source, as the
	// counters hold it, lists as many entries as the cell counts
	// (reviewer's finding: the NUL source's cell counted 1 and listed 0).
	bySource := map[string]int64{}
	for _, cell := range c.Cells {
		bySource[cell.Source] += cell.N
	}
	for src, n := range bySource {
		f := store.EntryFilter{Sources: []string{src}}
		if got := pagedRefs(t, p, f); int64(len(got)) != n {
			t.Errorf("source %q: counted %d, lists %d", src, n, len(got))
		}
		pg, err := p.SortedPage(ctx, f, false, "", 20)
		if err != nil || int64(len(pg.Items)) != n {
			t.Errorf("source %q sorted: %d listed (%v), counted %d", src, len(pg.Items), err, n)
		}
	}
	var n int64
	for _, cell := range c.Cells {
		n += cell.N
	}
	if n != int64(len(recs)) {
		t.Errorf("counters hold %d entries, want %d", n, len(recs))
	}
	if _, err := p.Gauges(ctx); err != nil {
		t.Errorf("gauges: %v", err)
	}
	if _, err := p.SortedPage(ctx, store.EntryFilter{States: store.OpenStates()}, false, "", 20); err != nil {
		t.Errorf("sorted page: %v", err)
	}
}
