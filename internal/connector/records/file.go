package records

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

// File is a DLQ held in one JSON file, read through its system's Format.
// Its undecodable records are named by the file's canonical path; with a
// store's StoredRef (KeepStoredNames), one the store holds under the path
// as typed (the name replayctl gave it before) keeps that name.
type File struct {
	Spec   string
	Path   string
	Format Format
	stored connector.StoredRef
}

func (s *File) String() string { return s.Spec }

// KeepStoredNames implements connector.NameKeeper.
func (s *File) KeepStoredNames(stored connector.StoredRef) { s.stored = stored }

func (s *File) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		f, err := OpenRegular(s.Path, 0)
		if err != nil {
			yield(entry.Entry{}, fmt.Errorf("read %s source: %w", s.Format.Kind, err))
			return
		}
		defer f.Close()
		key := Canonical(s.Path)
		rr := Reader{Format: s.Format, Name: s.Path, Key: key, R: f, MaxLine: MaxRecord}
		rr.Each(ctx, func(e entry.Entry, err error) bool {
			if err == nil && e.Undecodable() && s.stored != nil && key != s.Path {
				e, err = s.storedName(ctx, e, key)
			}
			return yield(e, err)
		})
	}
}

// storedName is e, an undecodable record named after key, or the same
// record under the name it had before (named after the path as typed)
// when the store holds it under that name and not under the new one.
func (s *File) storedName(ctx context.Context, e entry.Entry, key string) (entry.Entry, error) {
	rest, ok := strings.CutPrefix(e.ID, key)
	if !ok {
		return e, nil
	}
	has, err := s.stored(ctx, e.Ref())
	if err == nil && has {
		return e, nil
	}
	old := Undecodable(e.Source, s.Path+rest, errors.New(e.DecodeError))
	if err == nil {
		has, err = s.stored(ctx, old.Ref())
	}
	switch {
	case err != nil:
		return entry.Entry{}, fmt.Errorf("look up the stored entry of undecodable record %s: %w", e.ID, err)
	case has:
		return old, nil
	}
	return e, nil
}

// Canonical is path made absolute, with symbolic links resolved, cleaned;
// as far as it resolves (a path that does not exist: absolute and clean).
func Canonical(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}
