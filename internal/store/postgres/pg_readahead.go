package postgres

import (
	"fmt"

	"github.com/replayctl/replayctl/internal/store"
)

// Reads ahead under a claim (issue 16: the next cost per replay after the
// entry counters). Before its fenced transactions a worker reads, each in
// a round trip of its own, the entry's ledger row (is a dispatch left by
// a dead owner to recover?), the same row again (the decision's view of
// the key) and the entry (a hold, a write-back owed): 3 of ~12 round trips
// per replay. Under a fence whose key is known the first of these reads
// now fetches the ledger row and the entry together, in one statement,
// and keeps them for the next read of each, once: the reads return what
// they would have returned had they run a moment earlier, which is all
// separate reads at READ COMMITTED ever promised. Nothing kept is used by
// a write: a fenced transaction reads its rows locked (checkFence), and
// one that begins drops what is kept under its fence, as do the claim's
// release and any read that finds it used.

// readAhead is what the first read under a fence fetched; the ledger row
// and the entry are each served once.
type readAhead struct {
	ledger              []byte
	ledgerKept          bool
	rec, payload        []byte
	entryKept, hasEntry bool
}

// aheadLedger is View's Ledger under fence f of the key k (stored form).
func (t *pgTx) aheadLedger(f store.Fence, k string) ([]byte, error) {
	p := t.p
	p.aheadMu.Lock()
	if a := p.ahead[f.Token]; a != nil && a.ledgerKept {
		a.ledgerKept = false
		rec := a.ledger
		p.aheadMu.Unlock()
		return rec, nil
	}
	p.aheadMu.Unlock()
	// One statement (a statement costs the backend about as much as the
	// row it reads): no ledger row reads as NULL (rec is NOT NULL), no
	// entry as a row of NULLs.
	a := &readAhead{ledgerKept: true, entryKept: true}
	err := t.q.QueryRow(t.ctx, `SELECT (SELECT rec FROM ledger WHERE key = $1), e.ref IS NOT NULL, e.rec, e.payload
		FROM (SELECT 1) one LEFT JOIN entries e ON e.ref = $2`, k, pgKey(f.Ref)).Scan(&a.ledger, &a.hasEntry, &a.rec, &a.payload)
	if err != nil {
		return nil, fmt.Errorf("read ledger key %s and entry %s: %w", f.Key, f.Ref, err)
	}
	p.aheadMu.Lock()
	if p.ahead == nil {
		p.ahead = map[int64]*readAhead{}
	}
	p.ahead[f.Token] = a
	p.aheadMu.Unlock()
	return a.ledger, nil
}

// aheadEntry is the entry read ahead under f, if it is kept.
func (t *pgTx) aheadEntry(f store.Fence) (rec, payload []byte, found, ok bool) {
	p := t.p
	p.aheadMu.Lock()
	defer p.aheadMu.Unlock()
	a := p.ahead[f.Token]
	if a == nil || !a.entryKept {
		return nil, nil, false, false
	}
	a.entryKept = false
	if !a.ledgerKept {
		delete(p.ahead, f.Token)
	}
	return a.rec, a.payload, a.hasEntry, true
}

// dropAhead forgets what was read ahead under a claim's token.
func (p *Postgres) dropAhead(token int64) {
	p.aheadMu.Lock()
	delete(p.ahead, token)
	p.aheadMu.Unlock()
}
