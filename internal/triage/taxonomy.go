package triage

import (
	"regexp"
	"strings"
)

// builtinTaxonomy is the reason-code taxonomy from the Cordum triage model,
// extended with the codes Cordum really writes, Cordum's terminal job
// statuses (used when an entry has no reason code) and Prodigy's error
// types. rules.yaml may override or extend it. Generic codes that say
// nothing about the cause (Nexora's STEP_FAILED and UNEXPECTED_ERROR,
// Cordum's JOB_STATUS_FAILED, worker error codes) are deliberately absent:
// they fall through to message patterns and, unrecognised, are never
// replayed automatically. The README's taxonomy table says where upstream
// writes each code and why it has its class.
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
		"pool_overloaded", "tenant_limit", "dispatch_failed", "job_status_timeout")
	add(Poison, "schema_invalid", "parse_error", "tool_contract_mismatch", "validation_failed",
		"commit_validation_failed",
		// Cordum: the request or the routing is wrong; a replay fails the
		// same way until someone fixes it.
		"schema_validation_failed", "unknown_topic", "no_pool_mapping")
	add(Governance, "denied", "approval_required", "policy_snapshot_mismatch", "permission_denied",
		// Cordum: a policy or a person said no.
		"policy_denied", "safety_denied", "job_status_denied", "job_status_cancelled")
	add(UnknownCommit, "partial_external_write", "unknown_commit_state", "merge_conflict", "command_failed",
		// Cordum: the job ran (its output was held, or a worker failed it
		// repeatedly), so its side effects may already have happened.
		"output_quarantined", "output_quarantined_async", "max_retries_exceeded")
	return t
}

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

// classify applies taxonomy, then patterns, then the unrecognised fallback.
func (r *Rules) classify(reasonCode, message string) Classification {
	code := strings.ToLower(strings.TrimSpace(reasonCode))
	if code != "" {
		if c, ok := r.taxonomy[code]; ok {
			return Classification{Class: c, Why: "reason code " + code + " is " + string(c)}
		}
	}
	if message != "" {
		lower := strings.ToLower(message)
		for i := range r.patterns {
			if p := &r.patterns[i]; p.matches(lower) {
				return Classification{Class: p.class, Why: "message matches " + p.String() + " (" + string(p.class) + ")"}
			}
		}
	}
	why := "no reason code and no message pattern recognised"
	if code != "" {
		why = "reason code " + code + " is not in the taxonomy and no message pattern matched"
	}
	return Classification{Class: UnknownCommit, Unrecognised: true, Why: why + ": unrecognised, never auto-replayed"}
}
