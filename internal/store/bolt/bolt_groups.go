package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/store"
)

// Groups on bbolt. An entry's group is one more facet (entryFacets), so
// reindexFacets moves it with the entry in the same transaction:
//
//	counters: 'G' lp(group) 'n'  entries of the group
//	          'G' lp(group) 'o'  its open entries
//	          'y' lp(group) hour inflow: entries first seen in the hour
//	idx:      'M' lp(group) order(first seen) ikey(ref) -> entries key when it differs
//	groups:   group id -> GroupState (JSON)
//
// Listing reads the 'G' counters, 24 hour counters, the first and last
// member key and one entry per group: its cost follows the number of
// groups, never the number of entries.
var bucketGroups = []byte("groups")

const (
	dimGroupMember = 'M'
	cntGroup       = 'G'
	cntGroupHour   = 'y'
)

func groupCounterKey(gid string, kind byte) string {
	return string(append(store.AppendLP([]byte{cntGroup}, gid), kind))
}

func groupHourKey(gid string, hour time.Time) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(hour.UTC().Truncate(time.Hour).Unix()))
	return append(store.AppendLP([]byte{cntGroupHour}, gid), k[:]...)
}

// groupFacets adds the entry's group keys to f.
func groupFacets(r *store.EntryRecord, ik, val []byte, f *facets) {
	gid := store.GroupID(r)
	f.counters = append(f.counters, groupCounterKey(gid, 'n'))
	if f.open {
		f.counters = append(f.counters, groupCounterKey(gid, 'o'))
	}
	if !r.FirstSeen.IsZero() {
		f.counters = append(f.counters, string(groupHourKey(gid, r.FirstSeen)))
	}
	f.idx[string(append(append(store.AppendLP([]byte{dimGroupMember}, gid), store.OrderKey(r.FirstSeen)...), ik...))] = val
}

// Groups lists the groups with entries, largest open count first.
func (s *Bolt) Groups(ctx context.Context, now time.Time, limit int) ([]store.GroupSummary, error) {
	var out []store.GroupSummary
	err := s.db.View(func(tx *bolt.Tx) error {
		if !indexed(tx) {
			return store.ErrNotIndexed
		}
		cnt := tx.Bucket(bucketCounters)
		c := cnt.Cursor()
		for k, v := c.Seek([]byte{cntGroup}); k != nil && k[0] == cntGroup; k, v = c.Next() {
			gid, rest, ok := readLP(k[1:])
			if !ok || len(rest) != 1 {
				continue
			}
			if len(out) == 0 || out[len(out)-1].ID != gid {
				out = append(out, store.GroupSummary{ID: gid})
			}
			switch rest[0] {
			case 'n':
				out[len(out)-1].Total = readCount(v)
			case 'o':
				out[len(out)-1].Open = readCount(v)
			}
		}
		out = store.TopGroups(out, limit)
		for i := range out {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := groupDetail(tx, &out[i], now); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// Group reads one group.
func (s *Bolt) Group(ctx context.Context, id string, now time.Time) (*store.GroupSummary, error) {
	var out *store.GroupSummary
	err := s.db.View(func(tx *bolt.Tx) error {
		if !indexed(tx) {
			return store.ErrNotIndexed
		}
		cnt := tx.Bucket(bucketCounters)
		g := store.GroupSummary{ID: id, Total: readCount(cnt.Get([]byte(groupCounterKey(id, 'n')))),
			Open: readCount(cnt.Get([]byte(groupCounterKey(id, 'o'))))}
		if err := groupDetail(tx, &g, now); err != nil {
			return err
		}
		if g.Total == 0 && g.Lifecycle == nil {
			return store.ErrNotFound
		}
		out = &g
		return nil
	})
	return out, err
}

// groupDetail reads a group's trend, first and last member and state.
func groupDetail(tx *bolt.Tx, g *store.GroupSummary, now time.Time) error {
	cnt, idx := tx.Bucket(bucketCounters), tx.Bucket(bucketIdx)
	hours := store.TrendHours(now)
	g.Hourly = make([]int64, len(hours))
	// One seek and a walk over the group's hours in range (at most 24
	// keys, in hour order), not 24 lookups from the root.
	hc := cnt.Cursor()
	end := groupHourKey(g.ID, hours[len(hours)-1])
	for k, v := hc.Seek(groupHourKey(g.ID, hours[0])); k != nil && bytes.Compare(k, end) <= 0; k, v = hc.Next() {
		if len(k) < 8 {
			break
		}
		at := time.Unix(int64(binary.BigEndian.Uint64(k[len(k)-8:])), 0).UTC()
		if i := int(at.Sub(hours[0]) / time.Hour); i >= 0 && i < len(hours) && at.Equal(hours[i]) {
			g.Hourly[i] = readCount(v)
		}
	}
	prefix := store.AppendLP([]byte{dimGroupMember}, g.ID)
	c := idx.Cursor()
	var sample *store.EntryRecord
	if k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) >= len(prefix)+8 {
		g.First = orderTime(k[len(prefix) : len(prefix)+8])
		end := append(bytes.Clone(prefix), 0xff)
		lk, lv := c.Seek(end)
		if lk == nil {
			lk, lv = c.Last()
		} else {
			lk, lv = c.Prev()
		}
		if lk != nil && bytes.HasPrefix(lk, prefix) && len(lk) >= len(prefix)+8 {
			g.Last = orderTime(lk[len(prefix) : len(prefix)+8])
			ek := lk[len(prefix)+8:]
			if len(lv) > 0 {
				ek = lv
			}
			se, err := getJSON[store.StoredEntry](tx.Bucket(bucketEntries), ek)
			if err == nil && se != nil {
				sample = &se.EntryRecord
			}
		}
	}
	st, err := getJSON[store.GroupState](tx.Bucket(bucketGroups), []byte(g.ID))
	if err != nil {
		st = nil // an unreadable record reads as none; the next change replaces it
	}
	g.Finish(sample, st, now)
	return nil
}

// orderTime reads an orderKey (zero for eight zero bytes).
func orderTime(k []byte) time.Time {
	if bytes.Equal(k, make([]byte, 8)) {
		return time.Time{}
	}
	return timeFromKey(k)
}

// GroupStates calls fn with every lifecycle record.
func (s *Bolt) GroupStates(ctx context.Context, fn func(*store.GroupState) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketGroups)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			var st store.GroupState
			if err := store.DecodeValue(v, &st); err != nil {
				return nil // unreadable: the next change replaces it
			}
			return fn(&st)
		})
	})
}

// GroupState reads a group's lifecycle record (nil: none).
func (t *boltTx) GroupState(id string) (*store.GroupState, error) {
	return getJSON[store.GroupState](t.bucket(bucketGroups), []byte(id))
}

// PutGroupState writes a group's lifecycle record.
func (t *boltTx) PutGroupState(st *store.GroupState) error {
	if err := store.ValidGroupState(st); err != nil {
		return err
	}
	b := t.bucket(bucketGroups)
	if b == nil {
		return store.ErrReadOnly
	}
	return putJSON(b, []byte(st.ID), st)
}
