package prodigy

import "strings"

// prodigyTransientCause is the reason code of an item whose error type said
// nothing (ErrorType::Unknown) but which Prodigy itself marked
// reprocess_eligible for a transient cause, so that replayctl classifies it
// as Prodigy does rather than sending it to a person as unrecognised.
//
// Prodigy (iepathos/prodigy src/cook/execution/mapreduce/dlq_integration.rs
// is_reprocessable, lines 261-275 at 480b22a4; read at 328ac5c4) marks a
// failed agent reprocessable when its message contains "timeout",
// "network", "temporary", "rate limit" or "resource", and the reprocessor
// retries exactly those items (dlq_reprocessor.rs:335-337,
// items.retain(|item| item.reprocess_eligible)). classify_error gives the
// "timeout" and "resource" messages their own error types already; the
// others stay Unknown. The code is only given when Prodigy did not also ask
// for manual review (requires_manual_review: permission, fatal,
// validation, ...), and never to a CommandFailed item: an exit code means
// the command ran and may have changed the worktree (command_failed stays
// unknown_commit).
func prodigyTransientCause(code, message string, eligible *bool, manualReview bool) string {
	if code != "" || eligible == nil || !*eligible || manualReview {
		return code
	}
	m := strings.ToLower(message)
	switch {
	case strings.Contains(m, "rate limit"):
		return "rate_limited"
	case strings.Contains(m, "timeout"), strings.Contains(m, "timed out"):
		return "timeout"
	case strings.Contains(m, "network"), strings.Contains(m, "temporary"):
		return "dependency_unavailable"
	case strings.Contains(m, "resource"):
		return "resource_exhausted"
	}
	return code
}
