package source

import (
	"context"
	"fmt"
	"iter"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/prodigy"
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

// WriteBack is implemented by sources that can record at the source that an
// entry was replayed successfully (Prodigy: remove the item file, as `prodigy dlq retry` does).
type WriteBack interface {
	MarkReplayed(ctx context.Context, e entry.Entry) error
}

// Resolver is implemented by sources whose system records why an entry
// was resolved (Nexora: POST .../resolve {"reason"}); others take a
// resolve's write-back through WriteBack.
type Resolver interface {
	MarkResolved(ctx context.Context, e entry.Entry, reason string) error
}

// Sentinel errors.
var (
	// ErrOutsideRoot is prodigy.ErrOutsideRoot, kept here for callers.
	ErrOutsideRoot = prodigy.ErrOutsideRoot
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
