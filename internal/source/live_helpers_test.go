package source

import (
	"context"
	"iter"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/nexora"
	"github.com/replayctl/replayctl/internal/connector/pages"
	"github.com/replayctl/replayctl/internal/entry"
)

// liveSource is a live Cordum or Nexora source as these tests drive it:
// the connector, and the page reader it shares with the other.
type liveSource struct {
	*pages.Reader
	src interface {
		Source
		connector.Settler
		NativeTarget() string
	}
}

func newLiveSource(spec, kind, base string, getenv func(string) string) (*liveSource, error) {
	if kind == "cordum" {
		l, err := cordum.NewLive(spec, base, getenv)
		if err != nil {
			return nil, err
		}
		return &liveSource{Reader: l.Reader, src: l}, nil
	}
	l, err := nexora.NewLive(spec, base, getenv)
	if err != nil {
		return nil, err
	}
	return &liveSource{Reader: l.Reader, src: l}, nil
}

func (s *liveSource) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return s.src.Entries(ctx)
}

func (s *liveSource) Settle(ctx context.Context, e *entry.Entry, st connector.Settlement) error {
	return s.src.Settle(ctx, e, st)
}

func (s *liveSource) NativeTarget() string { return s.src.NativeTarget() }
