package records

import (
	"context"
	"fmt"
	"iter"

	"github.com/replayctl/replayctl/internal/entry"
)

// File is a DLQ held in one JSON file, read through its system's Format.
type File struct {
	Spec   string
	Path   string
	Format Format
}

func (s *File) String() string { return s.Spec }

func (s *File) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		f, err := OpenRegular(s.Path, 0)
		if err != nil {
			yield(entry.Entry{}, fmt.Errorf("read %s source: %w", s.Format.Kind, err))
			return
		}
		defer f.Close()
		rr := Reader{Format: s.Format, Name: s.Path, R: f, MaxLine: MaxRecord}
		rr.Each(ctx, yield)
	}
}
