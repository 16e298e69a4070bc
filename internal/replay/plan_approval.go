package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// Approval of an exact plan (issue 31; ServiceControl#660 asked for it):
// a mass replay is previewed, and what a person approves is that preview,
// not whatever the filter matches when it runs. The plan holds the exact
// entry set (and its fingerprint), the policy snapshot it was decided on,
// the velocity and an expiry; it is kept immutable beside the policy
// snapshots and asked for through the approvals machinery (four-eyes,
// approver group, expiry). `runs start PLAN` executes exactly that set:
// entries that arrived later are excluded and listed; a changed policy
// snapshot or an expired plan refuses to start.

// DefaultPlanTTL is how long a plan stays valid.
const DefaultPlanTTL = 24 * time.Hour

// Sentinel errors of plans.
var (
	// ErrPlanNotApproved: the plan's approval is pending, rejected or used.
	ErrPlanNotApproved = errors.New("plan not approved")
	// ErrPlanChanged: the policy snapshot differs from the plan's.
	ErrPlanChanged = errors.New("plan no longer holds")
	// ErrPlanExpired: the plan is past its expiry.
	ErrPlanExpired = errors.New("plan expired")
	// ErrNeedsPlan: a bulk replay over rules.yaml's plan_approval_over
	// for a target; nothing was changed.
	ErrNeedsPlan = errors.New("an approved plan is needed")
)

// requirePlan refuses a bulk replay that would send more entries to one
// target than rules.yaml's plan_approval_over allows without a plan.
func (b *Bulk) requirePlan(preview *BulkReport) error {
	r := b.Reconciler
	if b.planned || preview.Blast == nil || r.Engine == nil || r.Engine.Rules == nil {
		return nil
	}
	for _, target := range slices.Sorted(maps.Keys(preview.Blast.ByTarget)) {
		n := preview.Blast.ByTarget[target]
		if over := r.Engine.Rules.PlanApprovalOver(target); over > 0 && n > over {
			return fmt.Errorf("%w: %d entries would be replayed to %s, over its plan_approval_over of %d (rules.yaml): ask for the plan's approval with --request-approval --reason TEXT, then runs start PLAN; nothing was changed",
				ErrNeedsPlan, n, target, over)
		}
	}
	return nil
}

// PlanStore keeps plans (store.Backend has it).
type PlanStore interface {
	Store
	PutSnapshot(ctx context.Context, id string, v any) error
	Snapshot(ctx context.Context, id string, out any) error
}

// Plan is an exact mass replay waiting for, or holding, its approval.
type Plan struct {
	ID     string     `json:"id"`
	Kind   string     `json:"kind"` // "bulk-replay-plan"
	Filter BulkFilter `json:"filter"`
	// Refs are the entries the plan replays, in ref order; Fingerprint
	// hashes them with their idempotency keys.
	Refs           []string  `json:"refs"`
	Fingerprint    string    `json:"fingerprint"`
	PolicySnapshot string    `json:"policy_snapshot"`
	Rate           float64   `json:"rate_per_second,omitempty"`
	Spread         Duration  `json:"spread,omitzero"`
	MaxParallel    int       `json:"max_parallel,omitempty"`
	Max            int       `json:"max"`
	RequestedBy    string    `json:"requested_by"`
	RequestedAt    time.Time `json:"requested_at"`
	ExpiresAt      time.Time `json:"expires_at"`
	Reason         string    `json:"reason"`
	ApproverGroup  string    `json:"approver_group"`
	// What the approvers look at: the preview's counts and blast radius,
	// and a few sample entries.
	Matched  int            `json:"matched"`
	WouldNot map[string]int `json:"would_not_by_reason,omitempty"`
	Blast    *BlastRadius   `json:"blast_radius,omitempty"`
	Samples  []string       `json:"samples,omitempty"`
}

// Evidence is what the plan's approval is bound to: the entry set, the
// policy snapshot, the velocity and the expiry.
func (p *Plan) Evidence() string {
	h := sha256.New()
	for _, s := range []string{p.Fingerprint, p.PolicySnapshot, strconv.FormatFloat(p.Rate, 'g', -1, 64), p.Spread.String(),
		strconv.Itoa(p.MaxParallel), strconv.Itoa(p.Max), p.ExpiresAt.UTC().Format(time.RFC3339Nano)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// planFingerprint hashes the entry set: each ref with its key.
func planFingerprint(sel []*store.EntryRecord, refs []string) string {
	keys := map[string]string{}
	for _, er := range sel {
		keys[er.Entry.Ref()] = er.Entry.IdempotencyKey
	}
	h := sha256.New()
	for _, r := range refs {
		h.Write([]byte(r))
		h.Write([]byte{0})
		h.Write([]byte(keys[r]))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// PlanRequest is what RequestPlan needs besides the filter.
type PlanRequest struct {
	Reason        string
	TTL           time.Duration
	ApproverGroup string // default: the rules' default approver group
}

func (b *Bulk) planStore() (PlanStore, error) {
	if b.Reconciler.Store == nil {
		return nil, fmt.Errorf("%w: no state store to keep plans in", ErrState)
	}
	return b.Reconciler.Store, nil
}

// RequestPlan previews f, keeps the exact plan and opens its approval
// request, with an audit record.
func (b *Bulk) RequestPlan(ctx context.Context, f BulkFilter, pr PlanRequest) (*Plan, error) {
	if strings.TrimSpace(pr.Reason) == "" {
		return nil, fmt.Errorf("%w: a plan needs a reason (--reason TEXT)", ErrBadFilter)
	}
	ps, err := b.planStore()
	if err != nil {
		return nil, err
	}
	b.planned = true // asking for the plan is the way over the threshold
	preview, err := b.CheckReplay(ctx, f)
	if err != nil {
		return nil, err
	}
	r := b.Reconciler
	sel, err := b.selection(ctx, &f, r.Clock.Now())
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, it := range preview.Items {
		if acts(it.Category, WhyReplay) {
			refs = append(refs, it.Ref)
		}
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("%w: the filter matches %d entries and none would be replayed: nothing to approve", ErrState, preview.Matched)
	}
	slices.Sort(refs)
	ttl := pr.TTL
	if ttl <= 0 {
		ttl = DefaultPlanTTL
	}
	group := pr.ApproverGroup
	if group == "" && r.Engine != nil && r.Engine.Rules != nil {
		group = r.Engine.Rules.Defaults.ApproverGroup
	}
	if group == "" {
		return nil, fmt.Errorf("%w: no approver group: give --approver-group or defaults.approver_group in rules.yaml", ErrBadFilter)
	}
	now := r.Clock.Now().UTC()
	p := &Plan{Kind: "bulk-replay-plan", Filter: f, Refs: refs, Fingerprint: planFingerprint(sel, refs), Rate: r.Rate,
		Spread: Duration{b.Spread}, MaxParallel: r.MaxParallel, Max: b.max(), RequestedBy: r.Actor, RequestedAt: now,
		ExpiresAt: now.Add(ttl), Reason: pr.Reason, ApproverGroup: group, Matched: preview.Matched, WouldNot: preview.Why,
		Blast: preview.Blast, Samples: refs[:min(5, len(refs))]}
	if r.Engine != nil {
		p.PolicySnapshot = r.Engine.Snapshot
	}
	p.Filter.topics = nil
	ev := p.Evidence()
	sum := sha256.Sum256([]byte(ev + "\x00" + now.Format(time.RFC3339Nano)))
	p.ID = "plan_" + hex.EncodeToString(sum[:])[:16]
	if err := ps.PutSnapshot(ctx, p.ID, p); err != nil {
		return nil, fmt.Errorf("keep plan: %w", err)
	}
	detail, err := json.Marshal(map[string]any{"plan": p.ID, "fingerprint": p.Fingerprint, "entries": len(refs), "matched": p.Matched,
		"policy_snapshot": p.PolicySnapshot, "rate_per_second": p.Rate, "spread": p.Spread.String(), "expires_at": p.ExpiresAt})
	if err != nil {
		return nil, err
	}
	err = r.Store.Update(ctx, func(tx store.Tx) error {
		a := &store.Approval{ID: p.ID, ApproverGroup: group, State: store.ApprovalPending, Evidence: ev,
			RequestedBy: r.Actor, RequestedAt: now, ExpiresAt: p.ExpiresAt, Reason: pr.Reason}
		a.Decision.PolicySnapshot = p.PolicySnapshot
		if err := tx.PutApproval(a); err != nil {
			return err
		}
		_, err := tx.Append(&audit.Record{Actor: r.Actor, Kind: audit.KindApproval, Outcome: "plan requested",
			Reason: pr.Reason, PolicySnapshot: p.PolicySnapshot, Detail: detail})
		return err
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// LoadPlan reads a plan and its approval.
func LoadPlan(ctx context.Context, ps PlanStore, id string) (*Plan, *store.Approval, error) {
	if !strings.HasPrefix(id, "plan_") {
		return nil, nil, fmt.Errorf("%w: %q is not a plan id (plan_..., as dlq replay --request-approval printed)", ErrNotFound, id)
	}
	var p Plan
	if err := ps.Snapshot(ctx, id, &p); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, fmt.Errorf("%w: plan %s", ErrNotFound, id)
		}
		return nil, nil, err
	}
	var a *store.Approval
	err := ps.View(ctx, func(tx store.Tx) error {
		var err error
		a, err = tx.Approval(id)
		return err
	})
	if err == nil && a == nil {
		err = fmt.Errorf("%w: plan %s has no approval request", ErrNotFound, id)
	}
	return &p, a, err
}

// Refusal says why the plan would not start now under the rules and
// policy of snapshot (nil: it would). It is what ExecutePlan checks first,
// and what the API and the console show before anyone presses start.
func (p *Plan) Refusal(a *store.Approval, now time.Time, snapshot string) error {
	switch {
	case a == nil:
		return fmt.Errorf("%w: plan %s has no approval request", ErrNotFound, p.ID)
	case a.Evidence != p.Evidence():
		return fmt.Errorf("%w: the stored plan does not match what was approved", ErrPlanChanged)
	case a.State != store.ApprovalApproved:
		state := a.State
		if state == store.ApprovalPending && !a.ExpiresAt.IsZero() && now.After(a.ExpiresAt) {
			state = store.ApprovalExpired
		}
		return fmt.Errorf("%w: %s is %s (approvals approve %s, by someone other than %s)", ErrPlanNotApproved, p.ID, state, p.ID, p.RequestedBy)
	case a.Used:
		return fmt.Errorf("%w: %s was already executed", ErrPlanNotApproved, p.ID)
	case now.After(p.ExpiresAt):
		return fmt.Errorf("%w: %s expired at %s: request a new plan", ErrPlanExpired, p.ID, p.ExpiresAt.UTC().Format(time.RFC3339))
	case snapshot == "" || snapshot != p.PolicySnapshot:
		return fmt.Errorf("%w: the rules and policy changed since the plan (snapshot %s, now %s): request a new plan", ErrPlanChanged, p.PolicySnapshot, snapshot)
	}
	return nil
}

// CheckPlan loads a plan and says whether it would start now with this
// bulk's rules and policy: the refusal ExecutePlan would give, without
// changing anything (a server refuses a start before it makes a run).
func (b *Bulk) CheckPlan(ctx context.Context, id string) (*Plan, *store.Approval, error) {
	ps, err := b.planStore()
	if err != nil {
		return nil, nil, err
	}
	p, a, err := LoadPlan(ctx, ps, id)
	if err != nil {
		return nil, nil, err
	}
	r := b.Reconciler
	r.defaults()
	cur := ""
	if r.Engine != nil {
		cur = r.Engine.Snapshot
	}
	return p, a, p.Refusal(a, r.Clock.Now(), cur)
}

// PlanRun is what executing a plan adds to its bulk report.
type PlanRun struct {
	ID         string `json:"id"`
	ApprovedBy string `json:"approved_by"`
	Entries    int    `json:"entries"`
	// Excluded are entries that match the plan's filter and would be
	// replayed now but are not in the approved set (they arrived later):
	// left alone, for a plan of their own.
	Excluded []string `json:"excluded,omitempty"`
}

// ExecutePlan runs exactly an approved plan's entries at its velocity.
func (b *Bulk) ExecutePlan(ctx context.Context, id string) (*BulkReport, error) {
	ps, err := b.planStore()
	if err != nil {
		return nil, err
	}
	p, a, err := LoadPlan(ctx, ps, id)
	if err != nil {
		return nil, err
	}
	r := b.Reconciler
	r.defaults()
	b.planned = true
	now := r.Clock.Now()
	cur := ""
	if r.Engine != nil {
		cur = r.Engine.Snapshot
	}
	if err := p.Refusal(a, now, cur); err != nil {
		return nil, err
	}
	// Later arrivals: what the filter would replay now beyond the set.
	f := p.Filter
	preview, err := b.PreviewReplay(ctx, f)
	if err != nil {
		return nil, err
	}
	in := map[string]bool{}
	for _, ref := range p.Refs {
		in[ref] = true
	}
	run := &PlanRun{ID: p.ID, ApprovedBy: a.DecidedBy, Entries: len(p.Refs)}
	for _, it := range preview.Items {
		if acts(it.Category, WhyReplay) && !in[it.Ref] {
			run.Excluded = append(run.Excluded, it.Ref)
		}
	}
	// Mark it used first: a plan runs once (a second start is refused
	// even while the first is still going).
	err = r.Store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Approval(id)
		if err != nil {
			return err
		}
		if cur == nil || cur.Used || cur.State != store.ApprovalApproved {
			return fmt.Errorf("%w: %s was already executed", ErrPlanNotApproved, id)
		}
		cur.Used = true
		if err := tx.PutApproval(cur); err != nil {
			return err
		}
		detail, err := json.Marshal(run)
		if err != nil {
			return err
		}
		_, err = tx.Append(&audit.Record{Actor: r.Actor, Kind: audit.KindBulk, Outcome: "plan started", Reason: p.Reason,
			PolicySnapshot: p.PolicySnapshot, Detail: detail})
		return err
	})
	if err != nil {
		return nil, err
	}
	exact := f
	exact.All, exact.IDs = false, p.Refs
	b.Spread, b.Max = p.Spread.Duration, p.Max
	r.Rate, r.pace = p.Rate, nil
	if p.MaxParallel > 0 {
		r.MaxParallel = p.MaxParallel
	}
	r.defaults() // the pacer at the plan's rate
	rep, err := b.ExecuteReplay(ctx, exact)
	if rep != nil {
		rep.Plan = run
	}
	return rep, err
}
