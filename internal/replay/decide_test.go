package replay

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
)

// decideCounter counts the engine's decisions per entry (Reconciler.onDecide).
type decideCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func countDecides(r *Reconciler) *decideCounter {
	c := &decideCounter{n: map[string]int{}}
	r.onDecide = func(ref string) {
		c.mu.Lock()
		c.n[ref]++
		c.mu.Unlock()
	}
	return c
}

// over lists the entries decided more often than most times, and those
// of refs decided not at all.
func (c *decideCounter) over(most int, refs ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var bad []string
	for ref, n := range c.n {
		if n > most {
			bad = append(bad, fmt.Sprintf("%s decided %d times", ref, n))
		}
	}
	for _, ref := range refs {
		if c.n[ref] == 0 {
			bad = append(bad, ref+" never decided")
		}
	}
	sort.Strings(bad)
	return bad
}

// A run, a single replay and a bulk replay each decide an entry once (a
// bulk replay's preview is an execution of its own: twice in all), an
// approved entry included: the approval is a fact read with the others,
// not a reason to decide again (issue 33). Before, a run decided an
// approved entry twice, a single replay of it twice, and a bulk replay
// three to six times.
func TestDecideOncePerEntryPerExecution(t *testing.T) {
	ctx := context.Background()
	t.Run("reconcile", func(t *testing.T) {
		b := newBundle(t, baseRules)
		src := b.jsonl("dlq.jsonl", transient("t1", "k1"), transient("t2", "k2"), transient("t3", "k3"), highRisk("h1", "kh1"))
		r := b.reconciler(2)
		c := countDecides(r)
		b.run(r, src)
		if bad := c.over(1, "jsonl:t1", "jsonl:t2", "jsonl:t3", "jsonl:h1"); len(bad) > 0 {
			t.Fatalf("first run: %v", bad)
		}
		if err := b.approve(t, "jsonl:h1", "alice"); err != nil {
			t.Fatal(err)
		}
		r = b.reconciler(2)
		c = countDecides(r)
		b.run(r, src)
		if n := b.sink.perKey()["kh1"]; n != 1 {
			t.Fatalf("approved entry delivered %d times", n)
		}
		if bad := c.over(1, "jsonl:t1", "jsonl:h1"); len(bad) > 0 {
			t.Fatalf("second run: %v", bad)
		}
	})
	t.Run("single replay", func(t *testing.T) {
		b := newBundle(t, baseRules)
		r := b.reconciler(1)
		r.Router = NewRulesRouter(b.engine.Rules, nil) // no target yet: both wait
		b.run(r, b.jsonl("dlq.jsonl", transient("t1", "k1"), highRisk("h1", "kh1")))
		if err := b.approve(t, "jsonl:h1", "alice"); err != nil {
			t.Fatal(err)
		}
		for _, ref := range []string{"jsonl:t1", "jsonl:h1"} {
			r := b.reconciler(1)
			c := countDecides(r)
			if _, err := r.One(ctx, b.entry(ref)); err != nil {
				t.Fatal(err)
			}
			if bad := c.over(1, ref); len(bad) > 0 {
				t.Fatalf("single replay: %v", bad)
			}
		}
		if got := b.sink.perKey(); got["k1"] != 1 || got["kh1"] != 1 {
			t.Fatalf("deliveries %v", got)
		}
	})
	t.Run("bulk replay", func(t *testing.T) {
		b, _ := outage(t)
		if err := b.approve(t, "jsonl:h0", "alice"); err != nil {
			t.Fatal(err)
		}
		bk := b.bulk(0, 0)
		c := countDecides(bk.Reconciler)
		rep, err := bk.ExecuteReplay(ctx, BulkFilter{Classes: []string{"transient"}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Would != 46 || len(b.sink.perKey()) != 46 {
			t.Fatalf("would %d, delivered %d keys", rep.Would, len(b.sink.perKey()))
		}
		// Preview and execution: twice.
		if bad := c.over(2, "jsonl:t00", "jsonl:h0", "jsonl:h1"); len(bad) > 0 {
			t.Fatalf("bulk replay: %v", bad)
		}
	})
}
