package triage

import (
	"fmt"
	"strings"
)

// Class is the failure class of an entry.
type Class string

// The four failure classes.
const (
	Transient     Class = "transient"
	Poison        Class = "poison"
	Governance    Class = "governance"
	UnknownCommit Class = "unknown_commit"
)

// Classes lists every class in a stable order (for reports).
var Classes = [...]Class{Transient, Poison, Governance, UnknownCommit}

// ParseClass validates a class name (case-insensitive).
func ParseClass(s string) (Class, error) {
	c := Class(strings.ToLower(strings.TrimSpace(s)))
	for _, k := range Classes {
		if c == k {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown class %q (want transient, poison, governance or unknown_commit)", s)
}

// Action is what replayctl does with an entry.
type Action string

// Actions, from least to most strict; Skip stands apart: the entry needs
// nothing (already committed, or already handled at its source).
const (
	AutoReplay      Action = "auto_replay"
	RequireApproval Action = "require_approval"
	ManualReview    Action = "manual_review"
	Quarantine      Action = "quarantine"
	Skip            Action = "skip"
)

// RuleActions are the actions a rule may ask for.
var RuleActions = [...]Action{AutoReplay, RequireApproval, Quarantine, ManualReview}

// ParseAction validates an action a rule or a policy may name.
func ParseAction(s string) (Action, error) {
	a := Action(strings.ToLower(strings.TrimSpace(s)))
	for _, k := range RuleActions {
		if a == k {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown action %q (want auto_replay, require_approval, quarantine or manual_review)", s)
}

// strictness orders actions: a decision may only move up this scale.
func (a Action) strictness() int {
	switch a {
	case AutoReplay:
		return 0
	case RequireApproval:
		return 1
	case ManualReview:
		return 2
	case Quarantine:
		return 3
	case Skip:
		return 4
	}
	return 2 // an unknown action is treated as needing a person
}

// Stricter returns the stricter of a and b.
func Stricter(a, b Action) Action {
	if b.strictness() > a.strictness() {
		return b
	}
	return a
}

// NeedsPerson reports whether the action leaves the entry waiting for people.
func (a Action) NeedsPerson() bool {
	return a == RequireApproval || a == ManualReview || a == Quarantine
}

// DefaultAction is the action for a class when no rule matches.
func DefaultAction(c Class) Action {
	switch c {
	case Transient:
		return AutoReplay
	case Poison:
		return Quarantine
	case Governance:
		return RequireApproval
	}
	return ManualReview
}
