package store

import (
	"maps"
	"reflect"
	"slices"
)

// PreparedEntry is an entry record encoded ahead of the transaction that
// puts it (PrepareEntry, PutPrepared): its stored bytes and index facets,
// worked out outside bbolt's write lock, where every microsecond is
// serial (issue 33: encoding entry records was a sixth of the work inside
// it).
type PreparedEntry struct {
	rec    EntryRecord // a private copy of what was encoded, payload aside
	data   []byte      // encodeHotRecord(encodeEntry(rec))
	facets facets
}

// PrepareEntry encodes r as bbolt stores it, for a transaction to come
// that puts a record equal to r. nil when r does not encode (PutEntry
// reports why, in the transaction).
func PrepareEntry(r *EntryRecord) *PreparedEntry {
	data, err := encodeHotRecord(encodeEntry(r))
	if err != nil {
		return nil
	}
	return &PreparedEntry{rec: cloneUnpaid(r), data: data, facets: entryFacets(r)}
}

// PutPrepared is tx.PutEntry(r), writing p's encoding where r is what p
// was encoded from (compared whole: the record the transaction builds is
// the one the encoding was based on, or it is encoded again) and tx is
// bbolt's. The payload is written as PutEntry writes it.
func PutPrepared(tx Tx, r *EntryRecord, p *PreparedEntry) error {
	bt, ok := tx.(*boltTx)
	if !ok || p == nil || !p.holds(r) {
		return tx.PutEntry(r)
	}
	return bt.putEntry(r, p.data, p.facets)
}

// holds reports whether r is the record p was encoded from, its payload
// aside (stored apart, never encoded with the record).
func (p *PreparedEntry) holds(r *EntryRecord) bool {
	cmp := *r
	cmp.Entry.Payload = nil
	return reflect.DeepEqual(&cmp, &p.rec)
}

// cloneUnpaid is a copy of r sharing nothing with it, without its
// payload. TestCloneUnpaidCopiesEveryReference holds the list of the
// record's maps, slices and pointers to the type.
func cloneUnpaid(r *EntryRecord) EntryRecord {
	c := *r
	c.Entry.Payload = nil
	c.Entry.Labels = maps.Clone(r.Entry.Labels)
	c.Entry.Ancestors = slices.Clone(r.Entry.Ancestors)
	c.Entry.History = slices.Clone(r.Entry.History)
	if r.Group != nil {
		g := *r.Group
		c.Group = &g
	}
	return c
}
