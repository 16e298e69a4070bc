package triage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

// PolicyInput is the document the Rego policy sees as `input`. It carries
// what the policy needs to judge the proposal, not the payload.
type PolicyInput struct {
	Entry          *entry.Entry
	Class          Class
	Unrecognised   bool
	Rule           string
	RuleMatched    bool
	ProposedAction Action
	Owner          string
	ApproverGroup  string
	MaxReplays     int
	Ledger         LedgerView
}

// PolicyResult is the policy's answer.
type PolicyResult struct {
	Action  Action
	Reasons []string
}

// Policy evaluates the policy for one proposal. An error (including an
// undefined result or a timeout) makes the decision fail closed.
type Policy interface {
	Evaluate(ctx context.Context, in *PolicyInput) (PolicyResult, error)
}

// AlreadyCommitted is the reason given when the ledger (or a probe) shows
// the key was committed: the entry is skipped, never dispatched again.
const AlreadyCommitted = "already committed"

// NeedsProbe reports whether a compensating read should be made before
// deciding for good: the commit state is unknown and a person would
// otherwise have to look.
func (d *Decision) NeedsProbe() bool {
	return d.Action == ManualReview && d.Ledger.Probe == "" &&
		(d.Class == UnknownCommit || d.Ledger.State == StateOutcomeUnknown || d.Ledger.State == StateDispatching)
}

// Engine decides. It is safe for concurrent use once built.
type Engine struct {
	Rules  *Rules
	Policy Policy // nil: no policy step (tests of the rules alone)
	// Snapshot identifies the rules and policy text the engine runs with.
	Snapshot string
	// Now, when set, stamps a view without a time (LedgerView.At) with the
	// decision's time. Deciding never reads the wall clock itself: the
	// caller injects it here, and the time becomes a recorded input.
	Now func() time.Time
	// Holds are the failure groups people hold (hold.go): a fact of the
	// decision like the ledger view, read once per run.
	Holds Holds
}

// Decide returns the decision for one entry given what the ledger knows of
// its key. It has no side effects. The payload is hashed once here; a hash
// a ledger stored under the pre-issue-16 scheme is kept when it is that of
// the same payload (entry.PayloadHashAgainst).
func (g *Engine) Decide(ctx context.Context, e *entry.Entry, view LedgerView) Decision {
	return g.DecideWithPayloadHash(ctx, e, view, entry.PayloadHashAgainst(e.Payload, view.PayloadHash))
}

// DecideWithPayloadHash decides with the payload's hash given rather than
// computed: audit records keep an entry without its payload, and a recorded
// decision is re-run from them (`audit replay-decision`).
func (g *Engine) DecideWithPayloadHash(ctx context.Context, e *entry.Entry, view LedgerView, payloadHash string) (d Decision) {
	r := g.Rules
	if view.At.IsZero() && g.Now != nil {
		view.At = g.Now().UTC()
	}
	d = Decision{
		EntryID:        e.ID,
		EntryRef:       e.Ref(),
		Source:         e.Source,
		Origin:         e.Origin,
		Topic:          e.Topic,
		IdempotencyKey: e.IdempotencyKey,
		PayloadHash:    payloadHash,
		ReasonCode:     strings.ToLower(strings.TrimSpace(e.ReasonCode)),
		Ledger:         view,
		PolicySnapshot: g.Snapshot,
		MaxReplays:     DefaultMaxReplays,
		Backoff:        DefaultBackoff(),
		Owner:          r.Defaults.Owner,
		ApproverGroup:  r.Defaults.ApproverGroup,
	}
	if r.Defaults.MaxReplays != nil {
		d.MaxReplays = *r.Defaults.MaxReplays
	}
	if r.Defaults.Backoff != nil {
		d.Backoff = mergeBackoff(d.Backoff, *r.Defaults.Backoff)
	}
	// d is the named result, so the hash is taken of what is returned.
	defer func() { d.EvidenceHash = evidenceHash(&d, e) }()

	if e.Undecodable() {
		d.Class, d.ReasonCode, d.Rule = Poison, "parse_error", "undecodable"
		d.ProposedAction, d.Action = Quarantine, Quarantine
		d.because("record could not be decoded: " + e.DecodeError)
		return d
	}

	cl := r.classifyWith(e.ReasonCode, e.State.JobStatus, e.Message)
	d.Class, d.Unrecognised = cl.Class, cl.Unrecognised
	d.because(cl.Why)

	if rule := r.firstMatch(e, d.Class); rule != nil {
		d.Rule, d.ProposedAction = rule.ID(r.file), rule.action
		d.because(fmt.Sprintf("rule %s matched: %s", d.Rule, rule.action))
		if rule.MaxReplays != nil {
			d.MaxReplays = *rule.MaxReplays
		}
		if rule.Backoff != nil {
			d.Backoff = mergeBackoff(d.Backoff, *rule.Backoff)
		}
		if rule.Owner != "" {
			d.Owner = rule.Owner
		}
		if rule.ApproverGroup != "" {
			d.ApproverGroup = rule.ApproverGroup
		}
	} else {
		d.Rule, d.ProposedAction = "default:"+string(d.Class), DefaultAction(d.Class)
		d.because(fmt.Sprintf("no rule matched: %s default is %s", d.Class, d.ProposedAction))
	}
	// A compensating read that found the key not committed lets a person
	// approve the replay instead of investigating it (unknown commit path).
	notCommitted := view.Probe == ProbeNotCommitted
	if notCommitted && d.ProposedAction == ManualReview && d.Class == UnknownCommit {
		d.ProposedAction = RequireApproval
		d.because("compensating read: not committed, a person approves the replay")
	}
	d.Action = d.ProposedAction
	unsure := ManualReview
	if notCommitted {
		unsure = RequireApproval
	}
	if d.Unrecognised {
		d.escalate(unsure, "unrecognised failure: a person decides")
	}

	// What the source and the ledger know ends the decision early: there is
	// nothing left to replay, whatever the rules say.
	if e.State.Handled {
		d.Action = Skip
		d.because(fmt.Sprintf("already handled at the source (%s)", e.State.Status))
		return d
	}
	switch {
	case view.PayloadHash != "" && view.PayloadHash != d.PayloadHash:
		// Checked first: a different payload under a committed key is not
		// "already done", it is a second job claiming the same key.
		d.escalate(Quarantine, "idempotency key conflict: the key was seen before with a different payload")
	case view.State == StateSucceeded:
		d.Action = Skip
		d.because(AlreadyCommitted)
		return d
	case view.Probe == ProbeCommitted:
		d.Action = Skip
		d.because(AlreadyCommitted + " (compensating read found the key at the target)")
		return d
	case view.State == StateOutcomeUnknown || view.State == StateDispatching:
		d.escalate(unsure, "a previous replay's outcome is unknown: never retried blindly")
	case view.State == StateFailed:
		d.escalate(Quarantine, "a previous replay failed definitively")
	}
	if d.Action == AutoReplay && view.Used() >= d.MaxReplays {
		across := ""
		if view.LineageReplays > view.Replays {
			across = " across lineage " + view.Lineage
		}
		d.escalate(ManualReview, fmt.Sprintf("max_replays reached%s (%d of %d)", across, view.Used(), d.MaxReplays))
	}
	if e.State.ManualReviewRequired {
		d.escalate(ManualReview, "source requires manual review")
	}
	if e.State.ReprocessIneligible && d.Action == AutoReplay {
		d.escalate(RequireApproval, "source marks the entry not eligible for automatic reprocessing")
	}
	if d.Action == AutoReplay {
		if why, old := r.keyLifetimeExceeded(e, view); old {
			d.KeyLifetimeExceeded = true
			d.escalate(RequireApproval, why)
		}
	}

	g.applyHold(e, &d)
	if g.Policy != nil {
		g.applyPolicy(ctx, e, &d)
	}
	// A person's approval of exactly this evidence lifts require_approval,
	// and nothing else: a policy that now asks for more still wins, and a
	// committed key was skipped above.
	if view.Approved && d.Action == RequireApproval {
		d.Action = AutoReplay
		d.because("approved by a person for this evidence")
	}
	return d
}

// applyPolicy lets the policy make the action stricter, never laxer; any
// failure of the policy fails closed to manual_review.
func (g *Engine) applyPolicy(ctx context.Context, e *entry.Entry, d *Decision) {
	res, err := g.Policy.Evaluate(ctx, &PolicyInput{
		Entry: e, Class: d.Class, Unrecognised: d.Unrecognised,
		Rule: d.Rule, RuleMatched: !strings.HasPrefix(d.Rule, "default:"),
		ProposedAction: d.Action, Owner: d.Owner, ApproverGroup: d.ApproverGroup,
		MaxReplays: d.MaxReplays, Ledger: d.Ledger,
	})
	if err != nil {
		d.PolicyError = err.Error()
		d.escalate(ManualReview, "policy failed, failing closed: "+err.Error())
		return
	}
	if _, err := ParseAction(string(res.Action)); err != nil {
		d.PolicyError = "policy answered an invalid action: " + err.Error()
		d.escalate(ManualReview, "policy failed, failing closed: "+d.PolicyError)
		return
	}
	d.PolicyAction = res.Action
	for _, why := range res.Reasons {
		d.because("policy: " + why)
	}
	if Stricter(d.Action, res.Action) != d.Action {
		d.Action = res.Action
		d.because("policy made the action stricter: " + string(res.Action))
	}
}

func mergeBackoff(base, over Backoff) Backoff {
	if over.Strategy != "" {
		base.Strategy = over.Strategy
	}
	if over.Initial > 0 {
		base.Initial = over.Initial
	}
	if over.Max > 0 {
		base.Max = over.Max
	}
	if over.Multiplier > 0 {
		base.Multiplier = over.Multiplier
	}
	return base
}
