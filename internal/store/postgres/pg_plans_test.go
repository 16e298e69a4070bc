package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// Issue 33: the sealer chains a record by updating it after its writer
// inserted it. On full pages the new version went to another page, with
// an entry in each of the audit table's five indexes (one of them parsing
// the record's JSON): ~145 µs of PostgreSQL's time a replay. With room on
// each page the version stays on its page and, changing no indexed column,
// is a HOT update. A record whose sealed version is on the page its
// inserted one was on was updated in place (the sealer changes only prev
// and hash, in no index); one that moved paid the index entries.
func TestPostgresSealerUpdatesRecordsOnTheirPage(t *testing.T) {
	ctx := context.Background()
	p := openPG(t, testsvc.Postgres(t), store.Options{})
	p.stopSealer() // sealed below, after the pages are read
	p.stopSealer = nil
	// Records the size of a replay's (~750 bytes), three a transaction.
	detail := strings.Repeat("x", 500)
	const txs = 100
	for i := range txs {
		if err := p.Update(ctx, func(tx store.Tx) error {
			for k := range 3 {
				ref := fmt.Sprintf("jsonl:job_%05d", i)
				if _, err := tx.Append(&audit.Record{Actor: "bench", Kind: audit.KindDecision, EntryRef: ref, Action: "auto_replay", Reason: fmt.Sprintf("%d %s", k, detail)}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	pages := func() map[int64]string {
		rows, err := p.pool.Query(ctx, `SELECT seq, (ctid::text::point)[0]::text, hash IS NOT NULL FROM audit`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[int64]string{}
		for rows.Next() {
			var seq int64
			var page string
			var sealed bool
			if err := rows.Scan(&seq, &page, &sealed); err != nil {
				t.Fatal(err)
			}
			m[seq] = fmt.Sprintf("%s %v", page, sealed)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := pages()
	if len(before) != 3*txs {
		t.Fatalf("%d records, want %d", len(before), 3*txs)
	}
	if n, err := p.SealAudit(ctx, true); err != nil || n != 3*txs {
		t.Fatalf("sealed %d of %d records: %v", n, 3*txs, err)
	}
	after := pages()
	moved := 0
	for seq, b := range before {
		page, sealed, _ := strings.Cut(b, " ")
		if sealed != "false" {
			t.Fatalf("record %d was sealed before the sealer ran", seq)
		}
		if after[seq] != page+" true" {
			moved++
		}
	}
	// A few move all the same: a page's last records, when the versions
	// of the records before them filled it.
	if moved > len(before)/10 {
		t.Errorf("%d of %d records moved to another page when sealed (not HOT updates)", moved, len(before))
	}
}
