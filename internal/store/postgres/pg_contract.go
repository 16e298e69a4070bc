package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// What PostgreSQL answers of the contract (Backend) that bbolt answers
// from its views: entries by source id, approval requests by state and the
// chain's stored records for readers that decode them elsewhere.

// pgRefIDMigration indexes the entries by their ref reversed (a ref ends
// with its source id: ":id" or "/id"), so RefsByID reads the range of
// refs ending with an id, and the refs stored hashed (pgKey) apart.
const pgRefIDMigration = `CREATE INDEX entries_ref_rev ON entries ((reverse(ref) COLLATE "C"));
	 CREATE INDEX entries_ref_hashed ON entries (ref) WHERE starts_with(ref, chr(1) || 'sha256:');`

// RefsByID returns the refs of the entries whose source id is id (as
// bolt.Bolt.RefsByID), in ref order: the range of entries_ref_rev of the
// refs ending with id, and the refs stored hashed; the record decides.
func (p *Postgres) RefsByID(ctx context.Context, id string) ([]string, error) {
	// Reversed by characters, as reverse() does; an id a text parameter
	// cannot hold (NUL, not UTF-8) is in a hashed ref only.
	lo, hi := "1", "0"
	if !strings.ContainsRune(id, 0) && utf8.ValidString(id) {
		r := []rune(id)
		slices.Reverse(r)
		lo = string(r)
		hi = lo + string(utf8.MaxRune)
	}
	rows, err := p.pool.Query(ctx, `SELECT rec FROM entries WHERE (reverse(ref) COLLATE "C") >= $1 AND (reverse(ref) COLLATE "C") < $2
		UNION ALL SELECT rec FROM entries WHERE starts_with(ref, chr(1) || 'sha256:')`, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("entries by id: %w", err)
	}
	defer rows.Close()
	var refs []string
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		var r store.EntryRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("entries by id: %w", err)
		}
		if r.Entry.ID == id {
			refs = append(refs, r.Entry.Ref())
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("entries by id: %w", err)
	}
	slices.Sort(refs)
	return refs, nil
}

// ApprovalsByState calls fn with the requests whose stored state is one
// of states (case-insensitive; none: every state), in bbolt's order (its
// index by state: the state's key, then the oldest request first).
func (p *Postgres) ApprovalsByState(ctx context.Context, states []string, fn func(*store.Approval) error) error {
	var list []*store.Approval
	err := p.Approvals(ctx, func(a *store.Approval) error {
		if len(states) == 0 || slices.ContainsFunc(states, func(s string) bool { return strings.EqualFold(s, a.State) }) {
			list = append(list, a)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortStableFunc(list, func(a, b *store.Approval) int {
		return bytes.Compare(store.ApprovalStateKey(a), store.ApprovalStateKey(b))
	})
	for _, a := range list {
		if err := fn(a); err != nil {
			return err
		}
	}
	return nil
}

// AuditRangeRaw calls fn with every sealed record from seq `from` on, in
// order, as bytes store.DecodeValue reads into an audit.Sealed (bbolt's
// stored form); decoding is left to the caller's goroutines.
func (p *Postgres) AuditRangeRaw(ctx context.Context, from uint64, fn func(seq uint64, raw []byte) error) error {
	var buf []byte
	return p.AuditRange(ctx, from, func(seq uint64, s audit.Sealed, _ error) error {
		buf = append(buf[:0], `{"seq":`...)
		buf = strconv.AppendUint(buf, s.Seq, 10)
		buf = append(buf, `,"prev":`...)
		buf = strconv.AppendQuote(buf, s.Prev)
		buf = append(buf, `,"hash":`...)
		buf = strconv.AppendQuote(buf, s.Hash)
		buf = append(buf, `,"body":`...)
		buf = append(buf, s.Body...)
		buf = append(buf, '}')
		return fn(seq, buf)
	})
}

// Features implements Backend: many workers share a PostgreSQL store.
func (p *Postgres) Features() store.Features { return store.Features{Shared: true} }

var (
	_ store.Backend     = (*Postgres)(nil)
	_ store.Grouped     = (*Postgres)(nil)
	_ store.Indexed     = (*Postgres)(nil)
	_ audit.BlobChecker = (*Postgres)(nil)
)
