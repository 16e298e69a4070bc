package store

import (
	"context"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/testsvc"
)

// Issue 16: every worker read every source. One worker leads the ingest
// of a run; while it does, Ingesting says so and no other worker leads;
// once it completed, a worker whose run began before that does not read
// the sources again, one of a later run does.
func TestPostgresIngestsOncePerRun(t *testing.T) {
	ctx := context.Background()
	dsn := testsvc.Postgres(t)
	a, b := openPG(t, dsn, Options{}), openPG(t, dsn, Options{})
	since, err := a.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done, lead, err := a.LeadIngest(ctx, since)
	if err != nil || !lead {
		t.Fatalf("first worker does not lead: %v", err)
	}
	// A test that fails holding the lead must still let the pool close.
	held := true
	t.Cleanup(func() {
		if held {
			done(false)
		}
	})
	if busy, err := b.Ingesting(ctx); err != nil || !busy {
		t.Fatalf("ingest in progress not seen: %v %v", busy, err)
	}
	if _, lead, err := b.LeadIngest(ctx, since); err != nil || lead {
		t.Fatalf("second worker leads while the first ingests (%v)", err)
	}
	// A failed ingest is not complete: the next worker of the run leads.
	done(false)
	held = false
	if busy, err := b.Ingesting(ctx); err != nil || busy {
		t.Fatalf("ingest still seen after it ended: %v %v", busy, err)
	}
	done, lead, err = b.LeadIngest(ctx, since)
	if err != nil || !lead {
		t.Fatalf("no lead after a failed ingest: %v", err)
	}
	done(true)
	if _, lead, err := a.LeadIngest(ctx, since); err != nil || lead {
		t.Fatalf("the run's sources read twice (%v)", err)
	}
	later, err := a.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	later = later.Add(time.Millisecond)
	done, lead, err = a.LeadIngest(ctx, later)
	if err != nil || !lead {
		t.Fatalf("a later run does not ingest: %v", err)
	}
	done(true)
}
