package source

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/replayctl/replayctl/internal/connector"

	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/entry"
)

// Source yields the entries of one DLQ, one at a time, in a deterministic
// order (connector.Source). A record that cannot be decoded is still
// yielded, as an entry with DecodeError set, ID naming where it was
// ("file:line", "file#index" or the file path), Origin the same, Source
// the kind; from a live source (a running system's pages or Redis) ID is
// the record's own id, else a hash of its bytes, and Origin where it was.
type Source = connector.Source

// Sentinel errors.
var (
	// ErrOutsideRoot is registry.ErrOutsideRoot, kept here for callers.
	ErrOutsideRoot = registry.ErrOutsideRoot
	// ErrNotRegular is records.ErrNotRegular, kept here for callers.
	ErrNotRegular = records.ErrNotRegular
)

// UsageError is a --source value that cannot be used (connector.UsageError).
type UsageError = connector.UsageError

// Parse turns a --source flag value "KIND:PATH" into a Source: the
// connector registry's Open.
func Parse(spec string) (Source, error) {
	c, err := registry.Open(spec)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// All reads srcs one after another, as one stream in their order. A fatal
// error of a source is yielded as "source SPEC: err" and ends the stream.
func All(srcs []Source) func(context.Context) iter.Seq2[entry.Entry, error] {
	return func(ctx context.Context) iter.Seq2[entry.Entry, error] {
		return func(yield func(entry.Entry, error) bool) {
			for _, src := range srcs {
				for e, err := range src.Entries(ctx) {
					if err != nil {
						yield(entry.Entry{}, fmt.Errorf("source %s: %w", src, err))
						return
					}
					if !yield(e, nil) {
						return
					}
				}
			}
		}
	}
}

// FileScoped is a source whose record ids are unique only within its
// file (a JSON Lines export): FileScope names the file, canonically.
type FileScoped interface {
	FileScope() string
}

// Distinct keeps apart the entries of several file-scoped sources read in
// one run whose records share an id: each would otherwise be one entry
// (one record never delivered, the other gone from view). An entry whose
// ref an earlier such source already yielded gets its file as Scope, so
// its ref (kind:FILE/id) is its own. Its idempotency key is left as the
// record gave it or as derived from the id: the same record in two
// exports is still one replay, and two different records under one key
// meet the ledger's payload check and go to a person. One source, or
// sources whose ids do not collide, read exactly as before.
//
// It keeps the refs of the file-scoped sources' entries in memory; the
// wrapped sources offer nothing but String and Entries (a file-scoped
// source has no write-back).
func Distinct(srcs []Source) []Source {
	n := 0
	for _, s := range srcs {
		if _, ok := s.(FileScoped); ok {
			n++
		}
	}
	if n < 2 {
		return srcs
	}
	owner := &owners{first: map[string]int{}}
	out := make([]Source, len(srcs))
	for i, s := range srcs {
		out[i] = s
		if fs, ok := s.(FileScoped); ok {
			out[i] = &distinct{Source: s, i: i, scope: fs.FileScope(), owner: owner}
		}
	}
	return out
}

type distinct struct {
	Source
	i     int
	scope string
	owner *owners
}

// owners maps a ref to the index of the first source that yielded it.
type owners struct {
	mu    sync.Mutex
	first map[string]int
}

func (d *distinct) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		for e, err := range d.Source.Entries(ctx) {
			if err == nil && e.Scope == "" {
				ref := e.Ref()
				d.owner.mu.Lock()
				switch first, seen := d.owner.first[ref]; {
				case !seen:
					d.owner.first[ref] = d.i
				case first != d.i:
					e.Scope = d.scope
				}
				d.owner.mu.Unlock()
			}
			if !yield(e, err) {
				return
			}
		}
	}
}
