package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// A canary replay (issue 31; AWS's advice for redrives is "start small
// and ramp up"): replay a first slice of what a bulk replay would send,
// spread across its targets and topics, wait for the outcomes, and go on
// with the rest only when the slice's failure rate is at most AbortOver;
// else stop in state aborted_by_canary with the evidence, the rest
// untouched.

// DefaultCanaryWatch is how long a canary waits after its slice.
const DefaultCanaryWatch = 30 * time.Second

// ErrAbortedByCanary: the canary slice failed more than allowed; the rest
// of the operation was not started (a server run ends in state
// aborted_by_canary).
var ErrAbortedByCanary = errors.New("aborted by canary")

// Canary configures a canary replay.
type Canary struct {
	// N entries, or Percent of those that would be replayed (at least 1).
	N       int     `json:"n,omitempty"`
	Percent float64 `json:"percent,omitempty"`
	// Watch is how long to wait after the slice before judging it (the
	// slice's dispatches have their outcomes by then; a source that
	// reports returns (Returned) has time to show them).
	Watch Duration `json:"watch,omitzero"`
	// AbortOver is the highest failure rate (0..1) that lets the rest go
	// on; 0: any failure aborts.
	AbortOver float64 `json:"abort_over,omitempty"`
	// Returned counts the slice's entries whose lineage came back to the
	// DLQ during the watch: they are failures too. Unset, the run reads
	// its Sources again and the store's lineage records (canaryReturns).
	Returned func(ctx context.Context, refs []string) (int, error) `json:"-"`
}

// ParseCanary reads --canary: "N" or "P%".
func ParseCanary(s string) (Canary, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v <= 0 || v > 100 {
			return Canary{}, fmt.Errorf("%w: --canary %q: want a count (20) or a percentage (5%%) above 0 and at most 100%%", ErrBadFilter, s)
		}
		return Canary{Percent: v}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return Canary{}, fmt.Errorf("%w: --canary %q: want a count (20) or a percentage (5%%)", ErrBadFilter, s)
	}
	return Canary{N: n}, nil
}

// ParseRate reads --abort-over: a fraction (0.05) or a percentage (5%).
func ParseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	p, pct := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(p, 64)
	if pct {
		v /= 100
	}
	if err != nil || v < 0 || v > 1 || math.IsNaN(v) {
		return 0, fmt.Errorf("%w: --abort-over %q: want a failure rate from 0 to 1 (0.05) or a percentage (5%%)", ErrBadFilter, s)
	}
	return v, nil
}

// size is the slice's size out of would.
func (c *Canary) size(would int) int {
	n := c.N
	if c.Percent > 0 {
		n = int(math.Ceil(float64(would) * c.Percent / 100))
	}
	return max(1, min(n, would))
}

// CanaryReport is the evidence a canary leaves: the slice, its outcomes,
// its failure rate against the threshold, and whether it stopped the run.
type CanaryReport struct {
	Slice     []string       `json:"slice"`
	Outcomes  map[string]int `json:"outcomes"`
	Failed    int            `json:"failed"`
	Returned  int            `json:"returned,omitempty"`
	Rate      float64        `json:"failure_rate"`
	AbortOver float64        `json:"abort_over"`
	Watch     string         `json:"watch"`
	Aborted   bool           `json:"aborted"`
	// Failures are the slice's entries that did not succeed, with what
	// their dispatch did.
	Failures []BulkItem `json:"failures,omitempty"`
	// Untouched counts the entries the rest would have replayed.
	Untouched int `json:"untouched,omitempty"`
}

// spreadSlice picks n refs from items, round robin over their (target,
// topic) buckets in order of first appearance, so one bad target or topic
// shows in the slice.
func spreadSlice(items []BulkItem, bucket map[string]string, n int) []string {
	var keys []string
	by := map[string][]string{}
	for _, it := range items {
		k := bucket[it.Ref]
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], it.Ref)
	}
	var out []string
	for len(out) < n {
		took := false
		for _, k := range keys {
			if len(by[k]) > 0 && len(out) < n {
				out = append(out, by[k][0])
				by[k] = by[k][1:]
				took = true
			}
		}
		if !took {
			break
		}
	}
	return out
}

// ExecuteCanary runs a bulk replay behind a canary: the slice first, then
// (when it passes) the whole operation, whose committed keys the slice
// already took. An aborted canary returns the slice's report with Canary
// set and Stopped saying why; nothing else was sent.
func (b *Bulk) ExecuteCanary(ctx context.Context, f BulkFilter, c Canary) (*BulkReport, error) {
	r := b.Reconciler
	preview, err := b.CheckReplay(ctx, f)
	if err != nil {
		return nil, err
	}
	sel, err := b.selection(ctx, &f, r.Clock.Now())
	if err != nil {
		return nil, err
	}
	bucket := map[string]string{}
	for _, er := range sel {
		bucket[er.Entry.Ref()] = b.targetOf(er) + "\x00" + er.Entry.Topic
	}
	var would []BulkItem
	for _, it := range preview.Items {
		if acts(it.Category, WhyReplay) {
			would = append(would, it)
		}
	}
	if len(would) == 0 {
		return b.ExecuteReplay(ctx, f)
	}
	watch := c.Watch.Duration
	slice := spreadSlice(would, bucket, c.size(len(would)))
	returned := c.Returned
	if returned == nil {
		// Before the slice goes: what of its lineages is already there, so
		// that only what comes back after its replay counts.
		back, err := b.lineageWatch(ctx, slice)
		if err != nil {
			return nil, fmt.Errorf("canary: read the slice's lineages: %w", err)
		}
		returned = back.returned
	}
	cf := f
	cf.All, cf.IDs = false, slice
	rep, err := b.ExecuteReplay(ctx, cf)
	if err != nil || rep.Stopped != "" {
		return rep, err
	}
	if watch > 0 {
		if err := r.Clock.Sleep(ctx, watch); err != nil {
			rep.Stopped = "interrupted while watching the canary: run it again to go on"
			return rep, nil
		}
	}
	cr := &CanaryReport{Slice: slice, Outcomes: map[string]int{}, AbortOver: c.AbortOver, Watch: watch.String()}
	for _, it := range rep.Items {
		if !acts(it.Category, WhyReplay) {
			continue
		}
		cr.Outcomes[it.Outcome]++
		// Only a delivery counts as a pass; a retry, an unknown outcome or
		// a target found down is what a canary is there to catch.
		if it.Outcome != Succeeded.String() && it.Outcome != HandledElsewhere.String() {
			cr.Failed++
			cr.Failures = append(cr.Failures, it)
		}
	}
	if cr.Returned, err = returned(ctx, slice); err != nil {
		return rep, fmt.Errorf("canary: read what came back: %w", err)
	}
	cr.Rate = float64(cr.Failed+cr.Returned) / float64(len(slice))
	if cr.Rate > c.AbortOver {
		cr.Aborted, cr.Untouched = true, len(would)-len(slice)
		rep.Canary = cr
		rep.Stopped = fmt.Sprintf("aborted by canary: %d of %d failed (failure rate %.0f%% > --abort-over %.0f%%); the other %d entries were not touched",
			cr.Failed+cr.Returned, len(slice), 100*cr.Rate, 100*c.AbortOver, cr.Untouched)
		return rep, b.recordCanary(ctx, cr)
	}
	if err := b.recordCanary(ctx, cr); err != nil {
		return rep, err
	}
	full, err := b.ExecuteReplay(ctx, f)
	if full != nil {
		full.Canary = cr
	}
	return full, err
}

// recordCanary appends the canary's verdict with its evidence.
func (b *Bulk) recordCanary(ctx context.Context, cr *CanaryReport) error {
	detail, err := json.Marshal(cr)
	if err != nil {
		return err
	}
	verdict, reason := "canary passed", fmt.Sprintf("canary of %d: %d failed, rate %.2f <= %.2f: the rest goes on", len(cr.Slice), cr.Failed+cr.Returned, cr.Rate, cr.AbortOver)
	if cr.Aborted {
		verdict = "canary aborted"
		reason = fmt.Sprintf("canary of %d: %d failed, rate %.2f > %.2f: aborted, %d entries untouched", len(cr.Slice), cr.Failed+cr.Returned, cr.Rate, cr.AbortOver, cr.Untouched)
	}
	r := b.Reconciler
	return r.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		_, err := tx.Append(&audit.Record{Actor: r.Actor, Kind: audit.KindBulk, Outcome: verdict, Reason: reason, Detail: detail})
		return err
	})
}

// canaryReturns finds the slice's entries that came back to the DLQ: an
// entry of the lineage a replay of a slice entry is stamped with
// (entry.LineageLabel, Cordum's -retry- ancestry) that was not there
// before the slice was replayed. Where it looks: the run's Sources, read
// again (a run that has them: the server's bulk, a test), and the store's
// lineage records (store.Lineage members), which every ingesting run
// (reconcile, the server's poll) keeps; a bulk run without sources (`dlq
// replay --filter`) reads only those, one record per slice entry, so it
// sees a return once something has ingested it during the watch.
type canaryReturns struct {
	b       *Bulk
	byStamp map[string]string          // lineage stamp -> slice ref
	before  map[string]map[string]bool // lineage stamp -> refs already in it
}

// lineageWatch notes, before the slice is replayed, each slice entry's
// lineage stamp and the members it already has.
func (b *Bulk) lineageWatch(ctx context.Context, slice []string) (*canaryReturns, error) {
	w := &canaryReturns{b: b, byStamp: map[string]string{}, before: map[string]map[string]bool{}}
	err := b.Reconciler.Store.View(ctx, func(tx store.Tx) error {
		for _, ref := range slice {
			er, err := tx.Entry(ref)
			if err != nil {
				return err
			}
			if er == nil {
				continue
			}
			stamp := er.Entry.LineageStamp()
			w.byStamp[stamp] = ref
			seen := map[string]bool{ref: true}
			l, err := tx.Lineage(stamp)
			if err != nil {
				return err
			}
			if l != nil {
				for _, m := range l.Members {
					seen[m] = true
				}
			}
			w.before[stamp] = seen
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// What the sources hold of these lineages now was there before.
	err = w.eachInSources(ctx, func(stamp, ref string) { w.before[stamp][ref] = true })
	return w, err
}

// eachInSources calls fn for every entry of the sources that belongs to a
// slice entry's lineage.
func (w *canaryReturns) eachInSources(ctx context.Context, fn func(stamp, ref string)) error {
	for _, src := range w.b.Sources {
		for e, err := range src.Entries(ctx) {
			if err != nil {
				return fmt.Errorf("source %s: %w", src, err)
			}
			if root := e.LineageOf(); root != "" {
				if _, ok := w.byStamp[root]; ok {
					fn(root, e.Ref())
				}
			}
		}
	}
	return nil
}

// returned counts the slice entries of which an entry of their lineage
// appeared since lineageWatch (each slice entry once).
func (w *canaryReturns) returned(ctx context.Context, _ []string) (int, error) {
	back := map[string]bool{}
	note := func(stamp, ref string) {
		if !w.before[stamp][ref] {
			back[w.byStamp[stamp]] = true
		}
	}
	if err := w.eachInSources(ctx, note); err != nil {
		return 0, err
	}
	err := w.b.Reconciler.Store.View(ctx, func(tx store.Tx) error {
		for stamp := range w.byStamp {
			l, err := tx.Lineage(stamp)
			if err != nil {
				return err
			}
			if l == nil {
				continue
			}
			for _, m := range l.Members {
				note(stamp, m)
			}
		}
		return nil
	})
	return len(back), err
}
