package bolt

import (
	"bytes"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/idempotency"
)

// writeMemo remembers, for the ledger and entry records this process last
// wrote under a key, the exact bytes it stored and what they stand for: a
// ledger record decoded, an entry record's index facets. A dispatch writes
// both records at its intent and reads them back at its outcome, one
// commit later (issue 16: decoding the ledger record again and the entry
// record for its facets was ~12% of the work inside bbolt's write lock).
//
// It is content-addressed: an entry is used only when the bytes stored
// under the key now are those remembered, so a transaction that rolled
// back, another writer or a damaged page can only make it miss, never
// give a record the file does not hold. It is bounded: when full it is
// emptied, which only costs decodes.
type writeMemo struct {
	mu     sync.Mutex
	ledger map[string]memoLedger
	facets map[string]memoFacets
}

// maxMemo bounds each map: a few windows of dispatches in flight (a
// window is at most --max-parallel entries, two windows overlap). Each
// key holds its record's stored (compressed) bytes as well as what they
// decode to: an entry's facets are ~2 KB, its record what the entry's
// message, labels and history make it, so the memo holds 1,024 records
// of each kind at most (a few MB for typical entries, more for entries
// with long histories).
const maxMemo = 1024

type memoLedger struct {
	raw []byte
	rec idempotency.Record
}

type memoFacets struct {
	raw    []byte
	facets facets
}

// ledgerRecord returns the record raw encodes, when raw is what the memo
// holds for key.
func (m *writeMemo) ledgerRecord(key string, raw []byte) (*idempotency.Record, bool) {
	if m == nil || raw == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.ledger[key]
	if !ok || !bytes.Equal(e.raw, raw) {
		return nil, false
	}
	rec := e.rec
	return &rec, true
}

// putLedger remembers that raw, stored under key, encodes rec. Only
// records whose times are UTC are kept: JSON gives every time back in
// UTC, so these read back equal to what decoding would give.
func (m *writeMemo) putLedger(key string, raw []byte, rec *idempotency.Record) {
	if m == nil || !utc(rec.Created, rec.Updated, rec.Dispatched, rec.FirstDispatched) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ledger == nil || len(m.ledger) >= maxMemo {
		m.ledger = make(map[string]memoLedger, 64)
	}
	m.ledger[key] = memoLedger{raw: raw, rec: *rec}
}

// entryFacets returns the facets of the entry record raw encodes, when raw
// is what the memo holds for key.
func (m *writeMemo) entryFacets(key string, raw []byte) (facets, bool) {
	if m == nil || raw == nil {
		return facets{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.facets[key]
	if !ok || !bytes.Equal(e.raw, raw) {
		return facets{}, false
	}
	return e.facets, true
}

// putFacets remembers the facets of the entry record raw, stored under
// key. The facets' map is never changed once made (reindexFacets and
// PutEntry only read it), so it is shared, not copied.
func (m *writeMemo) putFacets(key string, raw []byte, f facets) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.facets == nil || len(m.facets) >= maxMemo {
		m.facets = make(map[string]memoFacets, 64)
	}
	m.facets[key] = memoFacets{raw: raw, facets: f}
}

func utc(ts ...time.Time) bool {
	for _, t := range ts {
		if t.Location() != time.UTC {
			return false
		}
	}
	return true
}
