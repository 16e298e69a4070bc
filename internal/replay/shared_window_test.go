package replay

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// stealingRouter takes the claim of one entry over for another worker
// when the run routes it: after its claim and decision, before its
// intent is written (the moment a worker paused past its lease loses it).
type stealingRouter struct {
	Router
	once  sync.Once
	ref   string
	steal func(ref string)
}

func (s *stealingRouter) Route(e *entry.Entry) (Route, bool) {
	if e.Ref() == s.ref {
		s.once.Do(func() { s.steal(e.Ref()) })
	}
	return s.Router.Route(e)
}

// takeOver gives ref's claim to owner w1 with a new fencing token, as a
// second worker's claim does once the first one's lease ran out (in one
// statement: expired first, the entry could be claimed again by its own
// worker's next claim).
func takeOver(t *testing.T, dsn string, ref string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, `UPDATE entries SET lease_owner = 'w1', lease_until = now() + interval '1 minute', fence = nextval('fence_seq') WHERE ref = $1`, ref)
	if err != nil || tag.RowsAffected() != 1 {
		t.Errorf("take over %s: %v %v", ref, tag, err)
	}
}

// Issue 16, windows on the shared store: one entry of a window whose
// lease was taken over fails alone. Its intent is refused (its claim's
// fence is checked for its own part of the window's transaction), it is
// not dispatched, and the run counts it as a stale claim; every other
// entry is replayed once.
func TestSharedWindowEntryWhoseLeaseWasTakenOverFailsAlone(t *testing.T) {
	b := newBundle(t, baseRules)
	dsn := testsvc.Postgres(t)
	pg, err := postgres.Open(context.Background(), dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	var entries []map[string]any
	for i := range 24 {
		entries = append(entries, transient(fmt.Sprintf("e%03d", i), fmt.Sprintf("k%03d", i)))
	}
	src := b.jsonl("dlq.jsonl", entries...)
	r := b.worker(pg, "w0")
	const stolen = "k005"
	var stolenRef string
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if e.IdempotencyKey == stolen {
			stolenRef = e.Ref()
		}
	}
	r.Router = &stealingRouter{Router: r.Router, ref: stolenRef, steal: func(ref string) { takeOver(t, dsn, ref) }}
	rep, err := r.Run(context.Background(), []source.Source{src})
	if err != nil {
		t.Fatal(err)
	}
	if rep.StaleClaims != 1 || rep.Replays.Succeeded != len(entries)-1 {
		t.Fatalf("%d stale claims, %d replayed; want 1 and %d", rep.StaleClaims, rep.Replays.Succeeded, len(entries)-1)
	}
	got := b.sink.perKey()
	for i := range entries {
		k := fmt.Sprintf("k%03d", i)
		want := 1
		if k == stolen {
			want = 0
		}
		if got[k] != want {
			t.Errorf("key %s delivered %d times, want %d", k, got[k], want)
		}
	}
	if v, err := pg.LedgerView(context.Background(), stolen); err != nil || v.State == "dispatching" {
		t.Fatalf("the stolen key's ledger: %+v %v: its intent was written", v, err)
	}
}

// The window's commit group on PostgreSQL: three entries' intents in one
// transaction, the second under a claim taken over. Only the second's
// write is refused (ErrStaleFence); the others commit in that one
// transaction, not again one by one. Counted from the store's trace.
// (Before, a stale part failed the whole transaction, and every part was
// written again alone.)
func TestSharedWindowStaleClaimIsLeftOutOfItsTransaction(t *testing.T) {
	ctx := context.Background()
	b := newBundle(t, baseRules)
	dsn := testsvc.Postgres(t)
	pg, err := postgres.Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	src := b.jsonl("dlq.jsonl", transient("e1", "k1"), transient("e2", "k2"), transient("e3", "k3"))
	var recs []*store.EntryRecord
	for e, err := range src.Entries(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &store.EntryRecord{Entry: e, Status: store.StatusPending})
	}
	if _, err := pg.Ingest(ctx, recs); err != nil {
		t.Fatal(err)
	}
	var fences []store.Fence
	for _, rec := range recs {
		c, ok, err := pg.ClaimRef(ctx, rec.Entry.Ref(), "w0", time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		fences = append(fences, store.Fence{Ref: rec.Entry.Ref(), Token: c.Token, Key: rec.Entry.IdempotencyKey})
	}
	takeOver(t, dsn, fences[1].Ref)
	before := pg.Trips()
	g := newCommitGroup(pg, len(fences))
	errs := make([]error, len(fences))
	var wg sync.WaitGroup
	// The stale part last: the others have written before it is checked.
	for n, i := range []int{0, 2, 1} {
		f := fences[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.submit(store.WithFence(ctx, f), func(tx store.Tx) error {
				_, err := tx.Transition(idempotency.Transition{Key: f.Key, To: idempotency.Decided, EntryRef: f.Ref})
				return err
			})
		}()
		for arrived := false; !arrived; runtime.Gosched() {
			g.mu.Lock()
			arrived = g.left == len(fences)-n-1
			g.mu.Unlock()
		}
	}
	wg.Wait()
	after := pg.Trips()
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], store.ErrStaleFence) {
		t.Fatalf("the parts' errors: %v; want only the second's, stale", errs)
	}
	// (Commits would count the sealer's too.) Run alone after a failed
	// group, the first part would have inserted its key twice.
	inserts := int64(0)
	for sql, n := range after.ByStatement {
		if strings.HasPrefix(sql, "insert into ledger") {
			inserts += n - before.ByStatement[sql]
		}
	}
	if inserts != 2 {
		t.Errorf("%d ledger inserts, want 2: the stale part is left out, the others are not written again alone", inserts)
	}
	for i, f := range fences {
		v, err := pg.LedgerView(ctx, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		if decided := v.State == "decided"; decided == (i == 1) {
			t.Errorf("key %s: %q", f.Key, v.State)
		}
	}
}
