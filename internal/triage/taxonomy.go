package triage

import (
	"regexp"
	"strings"
)

// builtinTaxonomy is the reason-code taxonomy from the Cordum triage model,
// extended with every code the newest Cordum writes, Cordum's job statuses
// (looked up as job_status_<status>, see statusCode), Nexora's codes and
// Prodigy's error types. rules.yaml may override or extend it.
//
// Codes that say nothing about the cause (Nexora's STEP_FAILED and
// UNEXPECTED_ERROR, Cordum's JOB_STATUS_FAILED) are listed as generic: for
// them, and only for them, the job status and then the message patterns
// decide. A code that is in no list at all (a worker's own error code, a
// code a newer release adds) is unrecognised: a message pattern may make it
// stricter (poison), never replayable (see classify).
//
// Where the newest Cordum (finmaster1/cordum e00450ed; the lines below were
// read at the stored commits named, the issue-27 lines at e00450ed) writes
// each code:
//
//	core/controlplane/scheduler/engine.go @04c77a08
//	  max_scheduling_retries  processJob, attempts >= maxSchedulingRetries      transient
//	  no_pool_mapping, no_workers, pool_overloaded, tenant_limit,
//	  dispatch_failed, tier_limit_exceeded  reasonCodeForSchedulingError          see below
//	  unknown_topic           processJob, topic not registered                  poison
//	  schema_validation_failed, schema_invalid, schema_not_found                poison
//	  schema_registry_unavailable  failSchemaValidation                          transient
//	  safety_denied (DENIED)  processJob SafetyDeny                             governance
//	  safety_unknown (DENIED) processJob default decision (e00450ed:1605-1621)  governance
//	  redelivery_dlq_retry (DENIED|FAILED) terminal-state redelivery             governance
//	  max_retries_exceeded    processJob, policy max_retries                    unknown_commit
//	  output_quarantined[_async] (DENIED) output policy held a result            unknown_commit
//	  quarantine_failed (FAILED, job SUCCEEDED) async quarantine gave up
//	                          (e00450ed:2632-2642)                              unknown_commit
//	  quarantine_panic_failed (job SUCCEEDED) (e00450ed:2500-2532)              unknown_commit
//	  approval_rejected (DENIED) replayApprovalPublish; gateway
//	                          handlers_approvals.go:1566-1586, DLQ tap
//	                          handlers_stream.go:328-357 (e00450ed)             governance
//	  <worker code> (any status) handleJobResult res.ErrorCode (e00450ed:2400-2404)  unrecognised
//	core/controlplane/scheduler/delegation_dispatch.go:19-27 @14cb4411
//	  delegation.* (revoked/expired/invalid/scope_exceeded/chain_too_deep/
//	  audience_mismatch before dispatch, missing_dispatch_token,
//	  dispatch_reverify_unavailable)                                            governance
//
// quarantine_failed and quarantine_panic_failed are unknown_commit, not
// governance: the job SUCCEEDED (its side effects happened) and only the
// move of its output into quarantine failed, so a replay would run it a
// second time; governance would let an approval send it again, while
// unknown_commit keeps it with a person who looks at what was done.
func builtinTaxonomy() map[string]Class {
	t := map[string]Class{}
	add := func(c Class, codes ...string) {
		for _, code := range codes {
			t[code] = c
		}
	}
	add(Transient, "timeout", "dependency_unavailable", "no_workers", "max_scheduling_retries",
		"resource_exhausted", "rate_limited", "worktree_error",
		// Cordum scheduler: capacity that frees up by itself.
		"pool_overloaded", "tenant_limit", "dispatch_failed", "schema_registry_unavailable",
		"job_status_timeout", "job_status_failed_retryable")
	add(Poison, "schema_invalid", "parse_error", "tool_contract_mismatch", "validation_failed",
		"commit_validation_failed",
		// Cordum: the request or the routing is wrong; a replay fails the
		// same way until someone fixes it.
		"schema_validation_failed", "schema_not_found", "unknown_topic", "no_pool_mapping",
		"job_status_failed_fatal")
	add(Governance, "denied", "approval_required", "policy_snapshot_mismatch", "permission_denied",
		// Cordum: a policy, a plan or a person said no.
		"policy_denied", "policy_violation", "safety_denied", "safety_unknown", "approval_rejected",
		"redelivery_dlq_retry", "tier_limit_exceeded", "delegation.*",
		"job_status_denied", "job_status_cancelled")
	add(UnknownCommit, "partial_external_write", "unknown_commit_state", "merge_conflict", "command_failed",
		// Cordum: the job ran (its output was held, or a worker failed it
		// repeatedly), so its side effects may already have happened.
		"output_quarantined", "output_quarantined_async", "max_retries_exceeded",
		"quarantine_failed", "quarantine_panic_failed", "job_status_succeeded", "job_status_completed")
	add(classGeneric, "job_status_failed", "job_status_unspecified", "step_failed", "unexpected_error")
	return t
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

// statusCode is the taxonomy key of a system's job status: Cordum writes
// "JOB_STATUS_DENIED" (DLQEntry.Status = pb.JobStatus.String(), engine.go
// emitDLQ) and older records "DENIED"; both become job_status_denied.
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
