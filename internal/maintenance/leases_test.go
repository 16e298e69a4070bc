package maintenance

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// On PostgreSQL the lease-renewal duty renews a held claim once less than
// three quarters of its lease is left (another worker still cannot take
// the entry), and marks a claim lost once the store says it is no longer
// current (released here; in life, taken over after its lease ran out).
func TestLeasesRenewAndLoseClaims(t *testing.T) {
	ctx := context.Background()
	pg, err := store.OpenPostgres(ctx, testsvc.Postgres(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	e := entry.Entry{ID: "l1", Source: "jsonl", IdempotencyKey: "l1"}
	if _, err := pg.Ingest(ctx, []*store.EntryRecord{{Entry: e, Status: store.StatusPending}}); err != nil {
		t.Fatal(err)
	}
	c, ok, err := pg.ClaimRef(ctx, e.Ref(), "worker-a", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	clock := &stepClock{now: time.Now()}
	before := runtime.NumGoroutine()
	ticks := newManualTicks()
	l, err := NewLeases(pg, time.Minute, Options{Tick: ticks.tick, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if l.Status().Every != 15*time.Second {
		t.Fatalf("default round interval %s, want a quarter of the lease", l.Status().Every)
	}
	h := l.Hold(e.Ref(), c.Token, clock.Now().Add(50*time.Second))
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ticks.fire(t) // 50s left of 60: more than three quarters, nothing to do
	waitRuns(t, l.Periodic, 1)
	if got := h.Until(); !got.Equal(clock.Now().Add(50 * time.Second)) {
		t.Fatalf("renewed too early: until %s", got)
	}
	clock.advance(20 * time.Second) // 30s left: renewed for a full lease
	ticks.fire(t)
	if s := waitRuns(t, l.Periodic, 2); s.Errors != 0 {
		t.Fatalf("renewal round: %+v", s)
	}
	if got, want := h.Until(), clock.Now().Add(time.Minute); !got.Equal(want) || h.Lost() {
		t.Fatalf("after renewal: until %s (want %s), lost %v", got, want, h.Lost())
	}
	if _, ok, err := pg.ClaimRef(ctx, e.Ref(), "worker-b", time.Minute); err != nil || ok {
		t.Fatalf("another worker took a renewed claim: %v %v", ok, err)
	}

	if err := pg.Release(ctx, e.Ref(), c.Token); err != nil {
		t.Fatal(err)
	}
	clock.advance(30 * time.Second)
	ticks.fire(t)
	waitRuns(t, l.Periodic, 3)
	if !h.Lost() || l.Held() != 0 {
		t.Fatalf("a claim no longer current: lost %v, %d held", h.Lost(), l.Held())
	}
	l.Stop()
	goroutinesBack(t, before)
}
