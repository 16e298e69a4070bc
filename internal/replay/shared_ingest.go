package replay

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

// idlePoll is how long a worker with nothing to claim waits while another
// worker is still ingesting.
const idlePoll = 10 * time.Millisecond

// sourceIndex finds the source an entry came from (for write-back): from
// the entries this worker ingested, else by kind, since a worker that did
// not lead the ingest never reads its sources.
type sourceIndex struct {
	srcs []source.Source
	mu   sync.Mutex
	seen map[string]source.Source
}

func (x *sourceIndex) saw(kind string, src source.Source) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.seen[kind]; !ok {
		x.seen[kind] = src
	}
}

func (x *sourceIndex) of(kind string) source.Source {
	x.mu.Lock()
	src, ok := x.seen[kind]
	x.mu.Unlock()
	if ok {
		return src
	}
	if len(x.srcs) == 1 {
		return x.srcs[0]
	}
	for _, s := range x.srcs {
		if strings.HasPrefix(s.String(), kind+":") {
			return s
		}
	}
	return nil
}

// ingestShared reads the sources into the shared store, in batches that
// other workers can claim as soon as each commits.
func (r *Reconciler) ingestShared(ctx context.Context, srcs []source.Source, sh store.Shared, since time.Time, idx *sourceIndex) (int, error) {
	ingested := 0
	batch := make([]*store.EntryRecord, 0, ingestBatch)
	srcOf := make(map[*store.EntryRecord]source.Source, ingestBatch)
	flush := func() error {
		n, err := sh.Ingest(ctx, batch)
		ingested += n
		if err == nil {
			for _, er := range batch {
				notifyStored(ctx, srcOf[er], &er.Entry)
			}
		}
		batch = batch[:0]
		clear(srcOf)
		if err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		return nil
	}
	for _, src := range srcs {
		for e, err := range src.Entries(ctx) {
			if err != nil {
				return ingested, fmt.Errorf("source %s: %w", src, err)
			}
			idx.saw(e.Source, src)
			er := &store.EntryRecord{Entry: e, Status: store.StatusPending, FirstSeen: since, LastSeen: since}
			batch = append(batch, er)
			srcOf[er] = src
			if len(batch) == ingestBatch {
				if err := flush(); err != nil {
					return ingested, err
				}
			}
		}
	}
	return ingested, flush()
}

// storedNotifier is a source that must hear once an entry it yielded is
// durably stored: a broker acks (RabbitMQ) or commits its consumer
// group's offset (Kafka) only then, so a kill before the store's commit
// leaves the message in the DLQ to be read again, and one after it finds
// it in the store. A failure to ack is the source's to note: the message
// stays in the DLQ and the next run reads it again.
type storedNotifier interface {
	Stored(ctx context.Context, e *entry.Entry)
}

// notifyStored tells src that e is durably stored, if src wants to know.
func notifyStored(ctx context.Context, src source.Source, e *entry.Entry) {
	if sn, ok := src.(storedNotifier); ok {
		sn.Stored(ctx, e)
	}
}
