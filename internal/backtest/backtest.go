package backtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Options say what to re-decide with.
type Options struct {
	// Engine is the candidate: the rules and policy under review.
	Engine *triage.Engine
	// Since leaves out decisions recorded before it (zero: all).
	Since time.Time
	// Workers deciding at once; 0 means GOMAXPROCS.
	Workers int
	// Samples kept per group (default 3) and new automatic replays listed
	// (default 20): the ones with the lowest decision ids, so the report
	// is the same on every run whatever the workers' timing.
	Samples, Highlight int
}

func (o *Options) defaults() {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Samples <= 0 {
		o.Samples = 3
	}
	if o.Highlight <= 0 {
		o.Highlight = 20
	}
}

// Report is what a backtest found.
type Report struct {
	Snapshot string    `json:"candidate_snapshot"`
	Since    time.Time `json:"since,omitzero"`
	// Decisions re-decided; Changed of them end in another action.
	Decisions int `json:"decisions"`
	Changed   int `json:"changed"`
	// NoInputs counts decision records without recorded inputs (written
	// before inputs were kept): they cannot be re-decided.
	NoInputs int `json:"no_inputs,omitempty"`
	// Unreadable counts stored records that could not be decoded (audit
	// verify says where): whether they were decisions cannot be told.
	Unreadable int `json:"unreadable,omitempty"`
	// Transitions counts the changes by (from, to), most first.
	Transitions []Transition `json:"transitions"`
	// Groups splits the changes by the candidate's rule, the failure
	// signature and the transition, most first.
	Groups []Group `json:"groups"`
	// NowAutoReplay counts the changes to auto_replay: entries a person or
	// the quarantine held that the candidate would send unattended.
	NowAutoReplay int      `json:"now_auto_replay"`
	AutoReplays   []Sample `json:"now_auto_replay_samples,omitempty"`
}

// Transition is one from -> to change and how often it happened.
type Transition struct {
	From  triage.Action `json:"from"`
	To    triage.Action `json:"to"`
	Count int           `json:"count"`
}

// Group is the changes of one rule and failure signature.
type Group struct {
	Rule      string        `json:"rule"`
	Signature string        `json:"signature"`
	From      triage.Action `json:"from"`
	To        triage.Action `json:"to"`
	Count     int           `json:"count"`
	Samples   []Sample      `json:"samples"`
}

// Sample is one changed decision.
type Sample struct {
	// Decision is the recorded decision's id (0 for an entry read from a
	// source).
	Decision uint64        `json:"decision,omitempty"`
	EntryRef string        `json:"entry_ref"`
	From     triage.Action `json:"from"`
	To       triage.Action `json:"to"`
	WasRule  string        `json:"was_rule"`
	Rule     string        `json:"rule"`
	Why      string        `json:"why"`
	order    uint64
}

// Chain is what a backtest reads of the store: its stored records
// undecoded (store.Backend.AuditRangeRaw), so that decoding happens on the
// workers rather than on the one reading goroutine.
type Chain interface {
	AuditRangeRaw(ctx context.Context, from uint64, fn func(seq uint64, raw []byte) error) error
}

// Decisions re-decides every decision recorded in r since o.Since with
// o.Engine. The chain is read once, in order, on one goroutine; the
// records are decoded and decided on o.Workers.
func Decisions(ctx context.Context, r Chain, o Options) (*Report, error) {
	o.defaults()
	produce := func(ctx context.Context, send func(job) bool) error {
		return r.AuditRangeRaw(ctx, 1, func(k uint64, v []byte) error {
			if !send(job{seq: k, body: append([]byte(nil), v...)}) {
				return ctx.Err()
			}
			return nil
		})
	}
	rep, err := run(ctx, o, produce, func(ctx context.Context, j *job, t *tally) error {
		// One decoding pass over the sealed record, straight into the
		// parts of its body a re-run reads.
		var sealed struct {
			Body slimRecord `json:"body"`
		}
		if j.seq == 0 || store.DecodeValue(j.body, &sealed) != nil {
			t.unreadable++ // audit verify reports where
			return nil
		}
		slim := sealed.Body
		if slim.Kind != audit.KindDecision || !o.Since.IsZero() && slim.Time.Before(o.Since) {
			return nil
		}
		rec := audit.Record{Seq: j.seq, Time: slim.Time, Kind: slim.Kind, Input: slim.Input}
		if slim.Decision != nil {
			rec.Decision = &triage.Decision{Action: slim.Decision.Action, Rule: slim.Decision.Rule,
				PayloadHash: slim.Decision.PayloadHash, Ledger: slim.Decision.Ledger}
		}
		to, err := rec.Rerun(ctx, o.Engine)
		if errors.Is(err, audit.ErrNoInputs) {
			t.noInputs++
			return nil
		}
		t.add(j.seq, true, rec.Input, rec.Decision, &to, o)
		return nil
	})
	return rep, err
}

// slimRecord is the part of a decision record a re-run reads: decoding
// the whole recorded decision (its reasons, its backoff's durations) was
// work thrown away.
type slimRecord struct {
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"`
	Decision *struct {
		Action      triage.Action     `json:"action"`
		Rule        string            `json:"rule"`
		PayloadHash string            `json:"payload_hash"`
		Ledger      triage.LedgerView `json:"ledger"`
	} `json:"decision"`
	Input *entry.Entry `json:"input"`
}

// LedgerView reads what the ledger knows of a key (nil: no ledger, every
// key is new).
type LedgerView func(ctx context.Context, key string) (triage.LedgerView, error)

// Entries decides every entry the stream yields with the baseline engine
// and with o.Engine, against the same ledger view at the same time, and
// counts the differences: a backtest over what is in the DLQ now rather
// than what was recorded.
func Entries(ctx context.Context, entries func(context.Context) iter.Seq2[entry.Entry, error], view LedgerView, baseline *triage.Engine, at time.Time, o Options) (*Report, error) {
	o.defaults()
	return run(ctx, o, func(ctx context.Context, send func(job) bool) error {
		var n uint64
		for e, err := range entries(ctx) {
			if err != nil {
				return err
			}
			n++
			if !send(job{seq: n, e: e}) {
				return ctx.Err()
			}
		}
		return nil
	}, func(ctx context.Context, j *job, t *tally) error {
		j.e.EnsureKey()
		var v triage.LedgerView
		if view != nil {
			var err error
			if v, err = view(ctx, j.e.IdempotencyKey); err != nil {
				return fmt.Errorf("ledger view of %s: %w", j.e.Ref(), err)
			}
		}
		v.At = at
		from := baseline.Decide(ctx, &j.e, v)
		to := o.Engine.Decide(ctx, &j.e, v)
		t.add(j.seq, false, &j.e, &from, &to, o)
		return nil
	})
}

// job is one record's bytes or one entry, with its place in the stream.
type job struct {
	seq  uint64
	body []byte
	e    entry.Entry
}

// batchSize: one channel operation per batch rather than per record.
const batchSize = 128

// run reads with produce on one goroutine and decides with decide on
// o.Workers, each into its own tally, merged at the end. At most
// 2*o.Workers batches are in memory.
func run(ctx context.Context, o Options, produce func(context.Context, func(job) bool) error,
	decide func(context.Context, *job, *tally) error) (*Report, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan []job, o.Workers)
	tallies := make([]*tally, o.Workers)
	errs := make([]error, o.Workers)
	var wg sync.WaitGroup
	for i := range o.Workers {
		tallies[i] = newTally()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				for j := range b {
					if errs[i] != nil {
						break // drain, so the reader is never stuck
					}
					if err := decide(ctx, &b[j], tallies[i]); err != nil {
						errs[i] = err
						cancel()
					}
				}
			}
		}()
	}
	b := make([]job, 0, batchSize)
	send := func(j job) bool {
		b = append(b, j)
		if len(b) < batchSize {
			return true
		}
		select {
		case work <- b:
		case <-ctx.Done():
			return false
		}
		b = make([]job, 0, batchSize)
		return true
	}
	perr := produce(ctx, send)
	if perr == nil && len(b) > 0 {
		select {
		case work <- b:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if perr != nil {
		return nil, perr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	total := newTally()
	for _, t := range tallies {
		total.merge(t, o)
	}
	rep := total.report(o)
	rep.Snapshot, rep.Since = o.Engine.Snapshot, o.Since
	return rep, nil
}

type groupKey struct {
	rule, signature string
	from, to        triage.Action
}

// tally is one worker's counts; its samples are bounded (the lowest ids).
type tally struct {
	decisions, changed, noInputs, nowAuto int
	unreadable                            int
	transitions                           map[[2]triage.Action]int
	groups                                map[groupKey]*Group
	auto                                  []Sample
}

func newTally() *tally {
	return &tally{transitions: map[[2]triage.Action]int{}, groups: map[groupKey]*Group{}}
}

func (t *tally) add(seq uint64, recorded bool, e *entry.Entry, from, to *triage.Decision, o Options) {
	t.decisions++
	if from.Action == to.Action {
		return
	}
	t.changed++
	t.transitions[[2]triage.Action{from.Action, to.Action}]++
	s := Sample{EntryRef: e.Ref(), From: from.Action, To: to.Action, WasRule: from.Rule, Rule: to.Rule, order: seq}
	if recorded {
		s.Decision = seq
	}
	if len(to.Reasons) > 0 {
		s.Why = to.Reasons[len(to.Reasons)-1]
	}
	if to.Action == triage.AutoReplay {
		t.nowAuto++
		t.auto = keepLowest(t.auto, s, o.Highlight)
	}
	k := groupKey{to.Rule, store.Signature(&store.EntryRecord{Entry: *e}), from.Action, to.Action}
	g := t.groups[k]
	if g == nil {
		g = &Group{Rule: k.rule, Signature: k.signature, From: k.from, To: k.to}
		t.groups[k] = g
	}
	g.Count++
	g.Samples = keepLowest(g.Samples, s, o.Samples)
}

func (t *tally) merge(o *tally, opt Options) {
	t.decisions += o.decisions
	t.changed += o.changed
	t.noInputs += o.noInputs
	t.unreadable += o.unreadable
	t.nowAuto += o.nowAuto
	for k, n := range o.transitions {
		t.transitions[k] += n
	}
	for _, s := range o.auto {
		t.auto = keepLowest(t.auto, s, opt.Highlight)
	}
	for k, g := range o.groups {
		mine := t.groups[k]
		if mine == nil {
			mine = &Group{Rule: g.Rule, Signature: g.Signature, From: g.From, To: g.To}
			t.groups[k] = mine
		}
		mine.Count += g.Count
		for _, s := range g.Samples {
			mine.Samples = keepLowest(mine.Samples, s, opt.Samples)
		}
	}
}

// keepLowest adds s to the list, keeping the n lowest in stream order.
func keepLowest(list []Sample, s Sample, n int) []Sample {
	i, _ := slices.BinarySearchFunc(list, s.order, func(a Sample, o uint64) int { return cmp.Compare(a.order, o) })
	if i >= n {
		return list
	}
	list = slices.Insert(list, i, s)
	if len(list) > n {
		list = list[:n]
	}
	return list
}

func (t *tally) report(o Options) *Report {
	rep := &Report{Decisions: t.decisions, Changed: t.changed, NoInputs: t.noInputs, Unreadable: t.unreadable, NowAutoReplay: t.nowAuto,
		Transitions: []Transition{}, Groups: []Group{}, AutoReplays: t.auto}
	for k, n := range t.transitions {
		rep.Transitions = append(rep.Transitions, Transition{From: k[0], To: k[1], Count: n})
	}
	slices.SortFunc(rep.Transitions, func(a, b Transition) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	for _, g := range t.groups {
		rep.Groups = append(rep.Groups, *g)
	}
	slices.SortFunc(rep.Groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Signature, b.Signature),
			cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	return rep
}
