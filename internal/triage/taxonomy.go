package triage

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// builtinTaxonomy is the reason-code taxonomy: the generic codes of the
// triage model, then every code a system writes (registered by the
// connectors, see RegisterCodes). rules.yaml may override or extend it.
//
// Codes that say nothing about the cause (classGeneric) are listed as
// generic: for them, and only for them, the job status and then the message
// patterns decide. A code that is in no list at all (a worker's own error
// code, a code a newer release adds) is unrecognised: a message pattern may
// make it stricter (poison), never replayable (see classify).
func builtinTaxonomy() map[string]Class {
	t := map[string]Class{}
	add := func(c Class, codes ...string) {
		for _, code := range codes {
			t[code] = c
		}
	}
	add(Transient, "timeout", "dependency_unavailable", "resource_exhausted", "rate_limited")
	add(Poison, "schema_invalid", "parse_error", "tool_contract_mismatch", "validation_failed")
	add(Governance, "denied", "approval_required", "policy_snapshot_mismatch", "permission_denied")
	add(UnknownCommit, "partial_external_write", "unknown_commit_state")
	registered.Lock()
	defer registered.Unlock()
	for _, c := range registered.codes {
		if prev, ok := t[c.code]; !ok || (prev != c.class && classRank(c.class) > classRank(prev)) {
			t[c.code] = c.class
		}
	}
	return t
}

// Code is a reason code a system writes, the class replayctl gives it and
// where upstream writes it (repo@commit file:line). It has the shape of
// connector.Code, which converts to it; triage names no system, the
// connectors list their own codes.
type Code struct {
	Code  string
	Class string // transient, poison, governance, unknown_commit, generic, or unrecognised
	Where string
}

// ClassUnrecognised is the class of a code a system writes that says
// nothing a person or a rule could act on (a broker's "rejected"): it is
// listed for the record and never enters the taxonomy, so it stays
// unrecognised and is never replayed automatically.
const ClassUnrecognised = "unrecognised"

type registeredCode struct {
	code  string
	class Class
}

// registered holds the codes of every system, sorted by code and class so
// that the taxonomy never depends on the order connectors registered in.
var registered struct {
	sync.Mutex
	codes []registeredCode
}

// RegisterCodes merges the reason codes a system writes into the built-in
// taxonomy of every Rules parsed afterwards (internal/connector/registry
// registers every connector's Codes()). Codes are matched case-insensitively;
// a code two systems class differently takes the stricter class, and a
// code the rules file lists keeps the file's class. Registering a code
// twice is harmless.
func RegisterCodes(codes []Code) error {
	var add []registeredCode
	for _, c := range codes {
		code := strings.ToLower(strings.TrimSpace(c.Code))
		if code == "" {
			return fmt.Errorf("taxonomy: empty reason code (%s)", c.Where)
		}
		if strings.EqualFold(c.Class, ClassUnrecognised) {
			continue
		}
		cl, err := ParseClass(c.Class)
		if strings.EqualFold(strings.TrimSpace(c.Class), string(classGeneric)) {
			cl, err = classGeneric, nil
		}
		if err != nil {
			return fmt.Errorf("taxonomy: code %q (%s): %w", code, c.Where, err)
		}
		add = append(add, registeredCode{code: code, class: cl})
	}
	registered.Lock()
	defer registered.Unlock()
	registered.codes = append(registered.codes, add...)
	sort.SliceStable(registered.codes, func(i, j int) bool {
		a, b := registered.codes[i], registered.codes[j]
		if a.code != b.code {
			return a.code < b.code
		}
		return a.class < b.class
	})
	return nil
}

// classGeneric marks a code known to say nothing about the cause: the job
// status and the message decide. It is never a decision's class.
const classGeneric Class = "generic"

// lookup finds a code in a taxonomy: exactly, or by its dotted family
// ("delegation.revoked_before_dispatch" under "delegation.*").
func lookup(t map[string]Class, code string) (Class, bool) {
	if c, ok := t[code]; ok {
		return c, true
	}
	if i := strings.IndexByte(code, '.'); i > 0 {
		c, ok := t[code[:i]+".*"]
		return c, ok
	}
	return "", false
}

// statusCode is the taxonomy key of a system's job status: a status
// written "JOB_STATUS_DENIED" or "DENIED" becomes job_status_denied (the
// connectors list the job_status_* codes their systems write).
func statusCode(status string) string {
	s := strings.ToLower(strings.TrimSpace(status))
	if s == "" || strings.HasPrefix(s, "job_status_") {
		return s
	}
	return "job_status_" + s
}

// classRank orders classes by the strictness of their default action, so a
// signal may only move a class towards stricter handling.
func classRank(c Class) int { return DefaultAction(c).strictness() }

// Pattern classifies by message when the reason code says nothing.
type Pattern struct {
	// Contains is a case-insensitive substring; Regex a case-insensitive
	// regular expression. Exactly one is set.
	Contains string `yaml:"contains,omitempty"`
	Regex    string `yaml:"regex,omitempty"`
	Class    string `yaml:"class"`

	line     int
	problems []string
	re       *regexp.Regexp
	lower    string
	class    Class
}

func (p *Pattern) matches(lowerMsg string) bool {
	if p.re != nil {
		return p.re.MatchString(lowerMsg)
	}
	return p.lower != "" && strings.Contains(lowerMsg, p.lower)
}

func (p *Pattern) String() string {
	if p.Regex != "" {
		return "regex " + p.Regex
	}
	return "contains " + p.Contains
}

// builtinPatterns are the fallback message patterns; rules.yaml patterns are
// tried before them.
func builtinPatterns() []Pattern {
	var ps []Pattern
	add := func(c Class, subs ...string) {
		for _, s := range subs {
			ps = append(ps, Pattern{Contains: s, Class: string(c), lower: s, class: c})
		}
	}
	add(Transient, "timeout", "timed out", "deadline exceeded", "connection refused", "unavailable")
	add(Governance, "permission", "access denied", "forbidden")
	add(Poison, "invalid json", "parse error", "schema")
	return ps
}

// Classification is the outcome of classifying one entry.
type Classification struct {
	Class Class
	// Unrecognised is set when neither the reason code nor any message
	// pattern said anything: the class is then unknown_commit and the entry
	// is never replayed automatically.
	Unrecognised bool
	// Why says what decided the class, for the decision's reasons.
	Why string
}

// classify classifies a reason code and a message alone (no job status).
func (r *Rules) classify(reasonCode, message string) Classification {
	return r.classifyWith(reasonCode, "", message)
}

// classifyWith applies, in order:
//
//  1. a job status that says a person or a policy refused the job
//     (governance) or that the job ran (unknown_commit) decides, or the
//     reason code's class when that is stricter; messages are not read;
//  2. a reason code in the taxonomy decides;
//  3. with no code or a generic one: the status's class, then the message
//     patterns, then unrecognised;
//  4. an unrecognised code stays unrecognised (never replayed
//     automatically); the status or a pattern may only make it stricter
//     (poison), never transient.
func (r *Rules) classifyWith(reasonCode, status, message string) Classification {
	code := strings.ToLower(strings.TrimSpace(reasonCode))
	st := statusCode(status)
	codeClass, codeKnown := lookup(r.taxonomy, code)
	if code == "" {
		codeClass, codeKnown = classGeneric, true
	}
	stClass, stKnown := lookup(r.taxonomy, st)
	if stKnown && (stClass == Governance || stClass == UnknownCommit) {
		c, why := stClass, "job status "+st+" is "+string(stClass)
		if codeKnown && codeClass != classGeneric && classRank(codeClass) > classRank(c) {
			c, why = codeClass, "reason code "+code+" is "+string(codeClass)+" (stricter than job status "+st+")"
		}
		return Classification{Class: c, Why: why + "; the status overrides any message"}
	}
	if codeKnown && codeClass != classGeneric {
		return Classification{Class: codeClass, Why: "reason code " + code + " is " + string(codeClass)}
	}
	if codeKnown { // no code, or a generic one
		if stKnown && stClass != classGeneric {
			return Classification{Class: stClass, Why: "job status " + st + " is " + string(stClass)}
		}
		if p := r.matchPattern(message); p != nil {
			return Classification{Class: p.class, Why: "message matches " + p.String() + " (" + string(p.class) + ")"}
		}
		why := "no reason code and no message pattern recognised"
		if code != "" {
			why = "reason code " + code + " is generic and no message pattern matched"
		}
		return Classification{Class: UnknownCommit, Unrecognised: true, Why: why + ": unrecognised, never auto-replayed"}
	}
	// An unrecognised code: nothing may make it replayable.
	out := Classification{Class: UnknownCommit, Unrecognised: true,
		Why: "reason code " + code + " is not in the taxonomy: unrecognised, never auto-replayed"}
	if stKnown && classRank(stClass) > classRank(out.Class) {
		out.Class, out.Why = stClass, out.Why+"; job status "+st+" makes it "+string(stClass)
	}
	if p := r.matchPattern(message); p != nil && classRank(p.class) > classRank(out.Class) {
		out.Class, out.Why = p.class, out.Why+"; message matches "+p.String()+" ("+string(p.class)+")"
	}
	return out
}

// matchPattern returns the first message pattern that matches, or nil.
func (r *Rules) matchPattern(message string) *Pattern {
	if message == "" {
		return nil
	}
	lower := strings.ToLower(message)
	for i := range r.patterns {
		if p := &r.patterns[i]; p.matches(lower) {
			return p
		}
	}
	return nil
}

// KnownCode reports whether a reason code is in the taxonomy (built-in or
// the file's, generic codes included): the codes a message pattern may
// still classify. Any other code is unrecognised and never auto-replayed.
func (r *Rules) KnownCode(reasonCode string) bool {
	code := strings.ToLower(strings.TrimSpace(reasonCode))
	_, ok := lookup(r.taxonomy, code)
	return ok || code == ""
}
