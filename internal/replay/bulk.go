package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gobwas/glob"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/group"
	"github.com/replayctl/replayctl/internal/runs"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Bulk defaults.
const (
	DefaultBulkMax     = 5000
	DefaultConfirmOver = 100
)

// BulkFilter selects stored entries for a bulk operation; every field set
// must hold. Lists match any of their values. The reason-code filter is
// reason_code, never "reason": that is a resolution's free text.
type BulkFilter struct {
	Classes   []string          `json:"class,omitempty"`
	Reasons   []string          `json:"reason_code,omitempty"`
	Topics    []string          `json:"topic,omitempty"` // globs, '.' separates segments
	Sources   []string          `json:"source,omitempty"`
	States    []string          `json:"state,omitempty"`
	OlderThan Duration          `json:"older_than,omitzero"` // last failure (or first seen) at least this long ago
	NewerThan Duration          `json:"newer_than,omitzero"`
	Labels    map[string]string `json:"labels,omitempty"`
	// IDs, Actions and Text let the console act on what a person selected
	// or searched: entry refs (or bare ids), triage actions, and a
	// case-insensitive substring of the id, key, topic or message.
	IDs     []string `json:"id,omitempty"`
	Actions []string `json:"action,omitempty"`
	Text    string   `json:"q,omitempty"`
	// Groups are failure group ids (groups list): every entry of them.
	Groups []string `json:"group,omitempty"`
	// All must be set to select every entry: an empty filter is refused, so
	// that a forgotten or mistyped filter flag never acts on the whole DLQ.
	All bool `json:"all,omitempty"`

	topics []*glob.Pattern
}

// Duration is a time.Duration written as "10m" in JSON.
type Duration struct{ time.Duration }

// MarshalJSON writes "1h30m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads "90m" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		d.Duration = v
		return err
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return errors.New(`want a duration such as "10m"`)
	}
	d.Duration = time.Duration(secs * float64(time.Second))
	return nil
}

// IsZero lets omitzero drop unset durations.
func (d Duration) IsZero() bool { return d.Duration == 0 }

// empty reports whether no filter field is set.
func (f *BulkFilter) empty() bool {
	return len(f.Classes) == 0 && len(f.Reasons) == 0 && len(f.Topics) == 0 && len(f.Sources) == 0 &&
		len(f.States) == 0 && f.OlderThan.Duration == 0 && f.NewerThan.Duration == 0 && len(f.Labels) == 0 &&
		len(f.IDs) == 0 && len(f.Actions) == 0 && f.Text == "" && len(f.Groups) == 0
}

// Compile validates the filter.
func (f *BulkFilter) Compile() error {
	if f.empty() && !f.All {
		return fmt.Errorf("%w: no filter given, so it would match every entry: give a filter (class, reason_code, topic, source, state, older_than, newer_than, labels) or all to mean every entry", ErrBadFilter)
	}
	if !f.empty() && f.All {
		return fmt.Errorf("%w: all together with a filter: give one or the other", ErrBadFilter)
	}
	f.topics = nil
	for _, t := range f.Topics {
		g, err := glob.Compile(t, '.')
		if err != nil {
			return fmt.Errorf("%w: bad topic glob %q: %v", ErrBadFilter, t, err)
		}
		f.topics = append(f.topics, g)
	}
	for _, c := range f.Classes {
		if _, err := triage.ParseClass(c); err != nil {
			return fmt.Errorf("%w: %v", ErrBadFilter, err)
		}
	}
	for _, s := range f.States {
		if !contains(store.Statuses, strings.ToLower(s)) {
			return fmt.Errorf("%w: unknown state %q", ErrBadFilter, s)
		}
	}
	for _, g := range f.Groups {
		if !group.IsID(g) {
			return fmt.Errorf("%w: %q is not a group id (g and 11 hex digits, as groups list shows)", ErrBadFilter, g)
		}
	}
	if f.OlderThan.Duration < 0 || f.NewerThan.Duration < 0 {
		return fmt.Errorf("%w: durations must be positive", ErrBadFilter)
	}
	return nil
}

// ErrBadFilter: the filter does not make sense (400 / exit 2).
var ErrBadFilter = errors.New("bad filter")

// ErrNoTarget: a bulk replay would send entries nowhere; it is refused
// before anything changes (a replay without a target would otherwise move
// every entry to manual review).
var ErrNoTarget = errors.New("no target")

func contains(list []string, v string) bool {
	for _, s := range list {
		if strings.EqualFold(s, v) {
			return true
		}
	}
	return false
}

// Match reports whether a stored entry passes the filter at now.
func (f *BulkFilter) Match(er *store.EntryRecord, now time.Time) bool {
	e := &er.Entry
	if len(f.Classes) > 0 && !contains(f.Classes, string(er.Class)) ||
		len(f.Reasons) > 0 && !contains(f.Reasons, e.ReasonCode) ||
		len(f.Sources) > 0 && !contains(f.Sources, e.Source) ||
		len(f.States) > 0 && !contains(f.States, er.Status) ||
		len(f.Actions) > 0 && !contains(f.Actions, string(er.Action)) ||
		len(f.IDs) > 0 && !contains(f.IDs, e.Ref()) && !contains(f.IDs, e.ID) ||
		len(f.Groups) > 0 && !contains(f.Groups, store.GroupID(er)) {
		return false
	}
	if f.Text != "" && !store.MatchText(e, f.Text) {
		return false
	}
	if len(f.topics) > 0 {
		ok := false
		for _, g := range f.topics {
			ok = ok || g.Match(e.Topic)
		}
		if !ok {
			return false
		}
	}
	for k, v := range f.Labels {
		if e.Labels[k] != v {
			return false
		}
	}
	when := e.LastFailure
	if when.IsZero() {
		when = er.FirstSeen
	}
	age := now.Sub(when)
	if f.OlderThan.Duration > 0 && age < f.OlderThan.Duration {
		return false
	}
	if f.NewerThan.Duration > 0 && age > f.NewerThan.Duration {
		return false
	}
	return true
}

// Why-not categories of a bulk preview, as the issue names them.
const (
	WhyReplay          = "replay"
	WhyCommitted       = "already committed"
	WhyQuarantined     = "quarantined"
	WhyResolved        = "already resolved"
	WhyPolicy          = "policy denies"
	WhyApproval        = "awaits approval"
	WhyKeyLifetime     = "awaits approval: older than the target's key_lifetime"
	WhyMaxReplays      = "max_replays reached"
	WhyUnknown         = "outcome unknown"
	WhyManual          = "needs manual review"
	WhyHandledAtSource = "handled at the source"
	WhyOverCap         = "over the --max cap"
	WhyNoTarget        = "no target"
	WhyRejected        = "approval rejected"
	WhyResolve         = "resolve"
	WhyNotOpen         = "not open (replayed, resolved or replaying)"
	WhyGroupHeld       = "group held"
	// BulkTargetUnavailable is a bulk replay's outcome for an entry its
	// target's open circuit breaker held (nothing sent, no budget spent).
	BulkTargetUnavailable = "target unavailable"
	bulkVerbReplay        = "replay"
	bulkVerbResolve       = "resolve"
	maxPreviewItems       = 10000
)

// category says what a bulk replay does with an entry given its stored
// record and a fresh decision: one of the Why constants.
func category(er *store.EntryRecord, d *triage.Decision) string {
	switch {
	case er.Hold == store.HoldResolved:
		return WhyResolved
	case er.Hold == store.HoldRejected:
		return WhyRejected
	case er.Hold != "":
		return WhyQuarantined
	case d.GroupHold != nil && d.Action != triage.Skip:
		return WhyGroupHeld
	case d.Action == triage.AutoReplay:
		return WhyReplay
	case d.Action == triage.Skip && (d.Ledger.State == triage.StateSucceeded || d.Ledger.Probe == triage.ProbeCommitted):
		return WhyCommitted
	case d.Action == triage.Skip:
		return WhyHandledAtSource
	case d.Ledger.State == triage.StateOutcomeUnknown || d.Ledger.State == triage.StateDispatching:
		return WhyUnknown
	case d.Ledger.Used() >= d.MaxReplays && d.ProposedAction == triage.AutoReplay && d.Action == triage.ManualReview:
		return WhyMaxReplays
	case d.Action == triage.RequireApproval && d.KeyLifetimeExceeded:
		return WhyKeyLifetime
	case d.Action == triage.RequireApproval:
		return WhyApproval
	case d.PolicyError != "" || (d.PolicyAction != "" && triage.Stricter(d.ProposedAction, d.PolicyAction) != d.ProposedAction):
		return WhyPolicy
	case d.Action == triage.Quarantine:
		return WhyQuarantined
	}
	return WhyManual
}

// BulkItem is one entry's fate in a preview or an execution.
type BulkItem struct {
	Ref      string `json:"entry_ref"`
	Category string `json:"category"`
	ReArm    bool   `json:"rearm,omitempty"`   // --reset-budget re-arms it (or did)
	Outcome  string `json:"outcome,omitempty"` // execution: what the dispatch did
}

// BulkReport is a preview, or the outcome of an execution.
type BulkReport struct {
	Op       string         `json:"operation"` // replay or resolve
	Filter   BulkFilter     `json:"filter"`
	Preview  bool           `json:"preview"`
	Matched  int            `json:"matched"`
	Selected int            `json:"selected"` // matched, up to --max
	Would    int            `json:"would"`    // would replay / resolve
	WouldNot int            `json:"would_not"`
	Why      map[string]int `json:"would_not_by_reason"`
	Max      int            `json:"max"`
	Spread   string         `json:"spread,omitempty"`
	Items    []BulkItem     `json:"items,omitempty"`
	AuditSeq uint64         `json:"audit_record,omitempty"`
	Replays  map[string]int `json:"replays,omitempty"` // execution: outcomes
	Done     int            `json:"done"`              // execution: entries handled
	Stopped  string         `json:"stopped,omitempty"`

	// ResetBudget: entries that reached max_replays or failed are re-armed
	// (ReArm counts them; most are then replayed and counted in Would too).
	ResetBudget bool   `json:"reset_budget,omitempty"`
	ReArm       int    `json:"rearm,omitempty"`
	Reason      string `json:"reason,omitempty"`

	// Delivery: an executed replay's planned entries by what happened to
	// them (bulk_delivery.go); its run is "partial" unless all delivered.
	Delivery *Delivery `json:"delivery,omitempty"`
	// Blast is what a preview would touch (blast.go).
	Blast *BlastRadius `json:"blast_radius,omitempty"`
	// Canary is the canary's evidence when the operation ran behind one
	// (canary.go).
	Canary *CanaryReport `json:"canary,omitempty"`
	// Plan is the approved plan an execution ran (plan_approval.go).
	Plan *PlanRun `json:"plan,omitempty"`

	// Run is the id of the run that executed it, RunState how it ended.
	Run      string `json:"run,omitempty"`
	RunState string `json:"run_state,omitempty"`
}

func (b *BulkReport) count(item BulkItem, will string) {
	if len(b.Items) < maxPreviewItems {
		b.Items = append(b.Items, item)
	}
	if item.ReArm {
		b.ReArm++
	}
	if acts(item.Category, will) {
		b.Would++
		return
	}
	b.WouldNot++
	b.Why[item.Category]++
}

// Bulk runs bulk operations over the stored entries.
type Bulk struct {
	Reconciler *Reconciler // engine, store, router, clock, actor, rate
	Inventory  Inventory
	Max        int           // cap on the replays (or resolves) of one operation (default 5000)
	Spread     time.Duration // spread the replays evenly over this long
	// ResetBudget re-arms matching entries that reached max_replays or
	// failed (as `dlq release` does, one audit record each) before
	// replaying them; Reason, required with it, says why.
	ResetBudget bool
	Reason      string
	// Run, when set, follows the execution: its total, each entry's
	// outcome, and (through the context the caller passes, which the run
	// cancels) a cancel that stops new dispatches.
	Run *runs.Tracker
	// Sources, when set, are the sources the operation's entries were read
	// from: a canary re-reads them during its watch for entries of the
	// slice's lineages that came back (canary.go); without them it reads
	// only the store's lineage records, which the runs that ingest keep.
	Sources []source.Source

	// planned: the operation is an approved plan, or asks for one
	// (plan_approval.go): rules.yaml's plan_approval_over does not apply.
	planned bool
}

// acts reports whether an entry in category cat is acted on by an
// operation whose action is will (a re-armed replay is a replay).
func acts(cat, will string) bool {
	return cat == will || will == WhyReplay && cat == WhyReArm
}

// capped turns an action past the cap into WhyOverCap; n counts actions.
func (b *Bulk) capped(cat, will string, n *int) string {
	if !acts(cat, will) {
		return cat
	}
	if *n >= b.max() {
		return WhyOverCap
	}
	*n++
	return cat
}

// selection returns the stored entries matching f, in ref order.
func (b *Bulk) selection(ctx context.Context, f *BulkFilter, now time.Time) ([]*store.EntryRecord, error) {
	if err := f.Compile(); err != nil {
		return nil, err
	}
	var out []*store.EntryRecord
	err := b.Inventory.Entries(ctx, func(er *store.EntryRecord) error {
		if f.Match(er, now) {
			out = append(out, er)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Entry.Ref() < out[j].Entry.Ref() })
	orderSequences(out) // a Kafka partition's records by offset (order.go)
	return out, err
}

func (b *Bulk) max() int {
	if b.Max <= 0 {
		return DefaultBulkMax
	}
	return b.Max
}

// PreviewReplay tells, without acting, what a bulk replay would do with
// each matching entry.
func (b *Bulk) PreviewReplay(ctx context.Context, f BulkFilter) (*BulkReport, error) {
	r := b.Reconciler
	r.defaults()
	if err := r.useHolds(ctx, nil); err != nil {
		return nil, err
	}
	sel, err := b.selection(ctx, &f, r.Clock.Now())
	if err != nil {
		return nil, err
	}
	rep := b.newReport(bulkVerbReplay, f, true, len(sel))
	rep.Blast = newBlast(true)
	n := 0
	for _, er := range sel {
		cat, rearm, _, err := b.replayPlan(ctx, er)
		if err == nil {
			err = ctx.Err() // a decision made while being cancelled is not one
		}
		if err != nil {
			return nil, err
		}
		cat = b.capped(cat, WhyReplay, &n)
		rep.count(BulkItem{Ref: er.Entry.Ref(), Category: cat, ReArm: rearm && cat != WhyOverCap}, WhyReplay)
		target := ""
		if acts(cat, WhyReplay) {
			target = b.targetOf(er)
		}
		rep.Blast.add(er, cat, target)
	}
	rep.Blast.velocity(rep.Would, b.Spread, r.Rate, r.MaxParallel)
	return rep, nil
}

// replayCategory is category, plus WhyNoTarget for a replay that has no
// route: the preview must say so, and execution refuses it.
func (b *Bulk) replayCategory(er *store.EntryRecord, d *triage.Decision) string {
	cat := category(er, d)
	if cat == WhyReplay {
		if b.Reconciler.Router == nil {
			return WhyNoTarget
		}
		if _, ok := b.Reconciler.Router.Route(&er.Entry); !ok {
			return WhyNoTarget
		}
	}
	return cat
}

// CheckReplay previews a bulk replay and refuses it (ErrNoTarget) when
// any entry it would replay has no target, before anything changes.
func (b *Bulk) CheckReplay(ctx context.Context, f BulkFilter) (*BulkReport, error) {
	preview, err := b.PreviewReplay(ctx, f)
	if err != nil {
		return nil, err
	}
	if n := preview.Why[WhyNoTarget]; n > 0 {
		return preview, fmt.Errorf("%w: %d of the %d matching entries would be replayed but have no target: give --target URL or a target in rules.yaml; nothing was changed", ErrNoTarget, n, preview.Matched)
	}
	return preview, b.requirePlan(preview) // plan_approval.go
}

func (b *Bulk) newReport(op string, f BulkFilter, preview bool, matched int) *BulkReport {
	rep := &BulkReport{Op: op, Filter: f, Preview: preview, Matched: matched, Max: b.max(), Why: map[string]int{}}
	if op == bulkVerbReplay && b.ResetBudget {
		rep.ResetBudget, rep.Reason = true, b.Reason
	}
	if b.Spread > 0 {
		rep.Spread = b.Spread.String()
	}
	return rep
}

// decideForBulk reads a stored entry's facts and decides on them as the
// runner does (decide.go), approvals included. The facts and decision are
// what an execution's replay of the entry acts on (handleOne, guarded by
// prepared.still), so that it is not decided again.
func (r *Reconciler) decideForBulk(ctx context.Context, er *store.EntryRecord) (*prepared, error) {
	e := er.Entry
	var p *prepared
	if err := r.Store.View(ctx, func(tx store.Tx) error {
		var err error
		p, err = readFacts(tx, &e)
		return err
	}); err != nil {
		return nil, err
	}
	d, err := r.decideOn(ctx, &e, p.view, p.approval, "")
	if err != nil {
		return nil, err
	}
	p.decision = d
	return p, nil
}

// ExecuteReplay records the bulk operation in the audit trail, then sends
// every selected entry through the same decision, ledger, approval and
// backoff path as reconcile, spreading the replays over b.Spread. An
// interrupted operation run again resumes: committed keys are skipped.
func (b *Bulk) ExecuteReplay(ctx context.Context, f BulkFilter) (*BulkReport, error) {
	if b.ResetBudget && strings.TrimSpace(b.Reason) == "" {
		return nil, fmt.Errorf("%w: --reset-budget needs a reason (--reason TEXT): it is recorded with every re-arm", ErrBadFilter)
	}
	preview, err := b.CheckReplay(ctx, f)
	if err != nil {
		return nil, err
	}
	r := b.Reconciler
	rep := b.newReport(bulkVerbReplay, f, false, preview.Matched)
	rep.Replays = map[string]int{}
	if rep.AuditSeq, err = b.recordBulk(ctx, bulkVerbReplay, preview); err != nil {
		return nil, err
	}
	sel, err := b.selection(ctx, &f, r.Clock.Now())
	if err != nil {
		return nil, err
	}
	b.track(len(sel), nil)
	var gap time.Duration
	if b.Spread > 0 && preview.Would > 1 {
		gap = b.Spread / time.Duration(preview.Would)
	}
	// Entries are planned (decided, capped, re-armed) one by one, in order,
	// and dispatched by up to MaxParallel workers through the same
	// handleOne as a single replay: concurrent ledger writes share fsyncs
	// (bbolt group commit). A spread paces dispatches one at a time.
	par := r.MaxParallel
	if gap > 0 || par < 1 {
		par = 1
	}
	// A cancel (Ctrl-C, `runs cancel`) can land in the middle of an entry's
	// store calls: that is a stop, recorded as one, not a failed operation.
	const resume = "interrupted: run the same operation again to resume (committed keys are skipped)"
	var (
		items   = make([]BulkItem, len(sel))
		pres    = make([]*prepared, len(sel)) // what the plan read and decided: handleOne acts on it
		handled = make([]bool, len(sel))
		mu      sync.Mutex // items, handled, stopped, fatal
		stopped bool
		fatal   error
		wg      sync.WaitGroup
	)
	stop := func() { mu.Lock(); stopped = true; mu.Unlock() }
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return fatal != nil }
	jobs := make(chan int)
	var chain orderChain
	turns := make([]*orderTurn, len(sel)) // set before i is sent on jobs
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if ctx.Err() != nil || failed() || turns[i].wait(ctx) != nil {
					turns[i].done()
					stop()
					continue // never started: not counted, the resumed run sends it
				}
				res, err := r.handleOne(ctx, sel[i], pres[i])
				turns[i].done()
				switch {
				case errors.Is(err, ErrState):
					// In flight elsewhere (another replay, or another worker's
					// claim): its outcome decides; not an error of the bulk.
					res.Final = "in_flight"
				case err != nil && ctx.Err() != nil:
					// Stopped: before its dispatch began (nothing to count), or
					// after its outcome was recorded (counted).
					stop()
					if len(res.Replays) == 0 {
						continue
					}
				case err != nil:
					mu.Lock()
					if fatal == nil {
						fatal = err
					}
					mu.Unlock()
					continue
				case len(res.Replays) == 0 && ctx.Err() != nil:
					// Cancelled before its dispatch ("run interrupted before
					// dispatch"): left for the resumed run, not counted.
					stop()
					continue
				}
				mu.Lock()
				it := &items[i]
				switch {
				case len(res.Replays) > 0:
					it.Outcome = res.Replays[len(res.Replays)-1]
				case res.Outcome == OutcomeUnavailable:
					// Held by its target's open breaker: nothing was sent,
					// which its action's name (auto_replay) would hide.
					it.Outcome = BulkTargetUnavailable
				default:
					it.Outcome = string(res.Final)
				}
				handled[i] = true
				done := *it
				mu.Unlock()
				b.track(0, &done)
			}
		}()
	}
	sent, n := 0, 0
plan:
	for i, er := range sel {
		if ctx.Err() != nil || failed() {
			stop()
			break
		}
		cat, rearm, pre, err := b.replayPlan(ctx, er)
		if ctx.Err() != nil {
			// A decision made while being cancelled is not one (the
			// policy fails closed on a cancelled context): leave it.
			stop()
			break
		} else if err != nil {
			mu.Lock()
			fatal = err
			mu.Unlock()
			break
		}
		cat = b.capped(cat, WhyReplay, &n)
		rearm = rearm && cat != WhyOverCap
		if rearm {
			why := fmt.Sprintf("reset-budget by bulk replay (record %d): %s", rep.AuditSeq, b.Reason)
			if _, err := Release(ctx, b.Inventory, er.Entry.Ref(), r.Actor, why); errors.Is(err, ErrState) {
				cat, rearm = WhyChanged, false
			} else if err != nil && ctx.Err() != nil {
				stop()
				break
			} else if err != nil {
				mu.Lock()
				fatal = err
				mu.Unlock()
				break
			}
		}
		if acts(cat, WhyReplay) && sent > 0 && gap > 0 {
			if err := r.Clock.Sleep(ctx, gap); err != nil {
				stop()
				break
			}
		}
		mu.Lock()
		items[i] = BulkItem{Ref: er.Entry.Ref(), Category: cat, ReArm: rearm}
		if !rearm {
			pres[i] = pre // a re-armed entry changed since: handle reads it again
		}
		if !acts(cat, WhyReplay) {
			handled[i] = true
			done := items[i]
			mu.Unlock()
			b.track(0, &done)
			continue
		}
		mu.Unlock()
		sent++
		turns[i] = chain.join(&er.Entry)
		select {
		case jobs <- i:
		case <-ctx.Done():
			turns[i].done()
			stop()
			break plan
		}
	}
	close(jobs)
	wg.Wait()
	if fatal != nil {
		return rep, fatal
	}
	if stopped || ctx.Err() != nil {
		rep.Stopped = resume
	}
	for i := range sel {
		if !handled[i] {
			continue
		}
		if acts(items[i].Category, WhyReplay) {
			rep.Replays[items[i].Outcome]++
		}
		rep.count(items[i], WhyReplay)
		rep.Done++
	}
	d := DeliveryOf(rep)
	rep.Delivery = &d
	return rep, b.recordBulkDone(ctx, rep)
}

// bulkStarted is the detail of the record written before an execution:
// what is about to be done, never a preview's "done: 0".
type bulkStarted struct {
	Op      string         `json:"operation"`
	Phase   string         `json:"phase"` // "started"
	Filter  BulkFilter     `json:"filter"`
	Matched int            `json:"matched"`
	Planned int            `json:"planned"` // would replay / resolve
	Why     map[string]int `json:"not_planned_by_reason"`
	Max     int            `json:"max"`
	Spread  string         `json:"spread,omitempty"`
	// ResetBudget: entries to re-arm (ReArm of them) and why.
	ResetBudget bool   `json:"reset_budget,omitempty"`
	ReArm       int    `json:"rearm,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// bulkFinished is the detail of the record written after an execution:
// what was done.
type bulkFinished struct {
	Op      string         `json:"operation"`
	Phase   string         `json:"phase"` // "finished" or "stopped"
	Started uint64         `json:"started_record"`
	Matched int            `json:"matched"`
	Done    int            `json:"done"`  // entries handled
	Acted   int            `json:"acted"` // replayed / resolved
	Replays map[string]int `json:"replays,omitempty"`
	Why     map[string]int `json:"not_acted_by_reason"`
	ReArmed int            `json:"rearmed,omitempty"`
	Stopped string         `json:"stopped,omitempty"`
}

// recordBulk writes the record of an execution about to start (no act
// without its record).
func (b *Bulk) recordBulk(ctx context.Context, op string, preview *BulkReport) (uint64, error) {
	r := b.Reconciler
	detail, err := json.Marshal(bulkStarted{Op: op, Phase: "started", Filter: preview.Filter, Matched: preview.Matched,
		Planned: preview.Would, Why: preview.Why, Max: preview.Max, Spread: preview.Spread,
		ResetBudget: preview.ResetBudget, ReArm: preview.ReArm, Reason: preview.Reason})
	if err != nil {
		return 0, err
	}
	rearm := ""
	if preview.ResetBudget {
		rearm = fmt.Sprintf(", %d to re-arm (reset-budget: %s)", preview.ReArm, preview.Reason)
	}
	var seq uint64
	err = r.Store.Update(ctx, func(tx store.Tx) error {
		sealed, err := tx.Append(&audit.Record{Actor: r.Actor, Kind: audit.KindBulk, Outcome: op,
			Reason: fmt.Sprintf("bulk %s started: %d matching entries, %d to %s (cap %d)%s", op, preview.Matched, preview.Would, op, preview.Max, rearm),
			Detail: detail})
		seq = sealed.Seq
		return err
	})
	return seq, err
}

// recordBulkDone writes what an execution did, even when it was
// interrupted. It runs on a context that outlives the caller's
// cancellation so an interrupted operation is still recorded.
func (b *Bulk) recordBulkDone(ctx context.Context, rep *BulkReport) error {
	r := b.Reconciler
	phase := "finished"
	if rep.Stopped != "" {
		phase = "stopped"
	}
	detail, err := json.Marshal(bulkFinished{Op: rep.Op, Phase: phase, Started: rep.AuditSeq, Matched: rep.Matched,
		Done: rep.Done, Acted: rep.Would, Replays: rep.Replays, Why: rep.Why, ReArmed: rep.ReArm, Stopped: rep.Stopped})
	if err != nil {
		return err
	}
	outcomes := ""
	for _, k := range slices.Sorted(maps.Keys(rep.Replays)) {
		outcomes += fmt.Sprintf(", %d %s", rep.Replays[k], k)
	}
	return r.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		_, err := tx.Append(&audit.Record{Actor: r.Actor, Kind: audit.KindBulk, Outcome: rep.Op + " " + phase,
			Reason: fmt.Sprintf("bulk %s %s (record %d): %d of %d matching entries handled, %d %s%s",
				rep.Op, phase, rep.AuditSeq, rep.Done, rep.Matched, rep.Would, pastTense(rep.Op), outcomes),
			Detail: detail})
		return err
	})
}

func pastTense(op string) string {
	if op == bulkVerbResolve {
		return "resolved"
	}
	return "replayed"
}

// PreviewResolve tells what a bulk resolve would do.
func (b *Bulk) PreviewResolve(ctx context.Context, f BulkFilter) (*BulkReport, error) {
	r := b.Reconciler
	r.defaults()
	sel, err := b.selection(ctx, &f, r.Clock.Now())
	if err != nil {
		return nil, err
	}
	rep := b.newReport(bulkVerbResolve, f, true, len(sel))
	rep.Blast = newBlast(false)
	n := 0
	for _, er := range sel {
		cat := b.capped(resolveCategory(er), WhyResolve, &n)
		rep.count(BulkItem{Ref: er.Entry.Ref(), Category: cat}, WhyResolve)
		rep.Blast.add(er, cat, "")
	}
	return rep, nil
}

func resolveCategory(er *store.EntryRecord) string {
	switch er.Status {
	case store.StatusReplayed, store.StatusResolved, store.StatusReplaying:
		return WhyNotOpen
	}
	return WhyResolve
}

// ExecuteResolve records the bulk operation, then resolves every selected
// open entry with the reason, each with its own audit record.
func (b *Bulk) ExecuteResolve(ctx context.Context, f BulkFilter, reason string) (*BulkReport, error) {
	if strings.TrimSpace(reason) == "" {
		return nil, fmt.Errorf("%w: a reason is required", ErrBadFilter)
	}
	preview, err := b.PreviewResolve(ctx, f)
	if err != nil {
		return nil, err
	}
	rep := b.newReport(bulkVerbResolve, f, false, preview.Matched)
	if rep.AuditSeq, err = b.recordBulk(ctx, bulkVerbResolve, preview); err != nil {
		return nil, err
	}
	sel, err := b.selection(ctx, &f, b.Reconciler.Clock.Now())
	if err != nil {
		return nil, err
	}
	b.track(len(sel), nil)
	n := 0
	for _, er := range sel {
		if ctx.Err() != nil {
			rep.Stopped = "interrupted: run it again to resolve the rest"
			break
		}
		cat := b.capped(resolveCategory(er), WhyResolve, &n)
		if cat == WhyResolve {
			if _, err := Resolve(ctx, b.Inventory, er.Entry.Ref(), b.Reconciler.Actor, reason); err != nil {
				if ctx.Err() != nil {
					rep.Stopped = "interrupted: run it again to resolve the rest"
					break
				}
				if !errors.Is(err, ErrState) {
					return rep, err
				}
				cat = WhyNotOpen
			}
		}
		item := BulkItem{Ref: er.Entry.Ref(), Category: cat}
		rep.count(item, WhyResolve)
		rep.Done++
		b.track(0, &item)
	}
	if err := b.recordBulkDone(ctx, rep); err != nil {
		return rep, err
	}
	return rep, b.resolveGroups(ctx, f, rep, reason)
}
