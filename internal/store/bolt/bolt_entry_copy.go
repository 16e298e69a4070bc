package bolt

import (
	"github.com/replayctl/replayctl/internal/store"
	"maps"
	"slices"
)

// cloneUnpaid is a copy of r sharing nothing with it, without its
// payload (boltTx.entryAgain). TestCloneUnpaidCopiesEveryReference holds
// the list of the record's maps, slices and pointers to the type.
func cloneUnpaid(r *store.EntryRecord) store.EntryRecord {
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
