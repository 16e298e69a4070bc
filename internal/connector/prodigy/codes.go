package prodigy

import "github.com/replayctl/replayctl/internal/connector"

// Codes lists the reason codes prodigyErrorType writes for Prodigy's
// ErrorType variants (iepathos/prodigy at ef879f26a764,
// src/cook/execution/dlq.rs FailureDetail.error_type) that the generic
// taxonomy does not already know (Timeout, ResourceExhausted,
// ValidationFailed and PermissionError map to its timeout,
// resource_exhausted, validation_failed and permission_denied). Unknown
// and newer variants get no code: the message decides.
func Codes() []connector.Code {
	const where = "iepathos/prodigy@ef879f26a764 src/cook/execution/dlq.rs ErrorType::"
	return []connector.Code{
		{Code: "worktree_error", Class: "transient", Where: where + "WorktreeError"},
		{Code: "commit_validation_failed", Class: "poison", Where: where + "CommitValidationFailed"},
		// The command ran and may have changed the worktree.
		{Code: "merge_conflict", Class: "unknown_commit", Where: where + "MergeConflict"},
		{Code: "command_failed", Class: "unknown_commit", Where: where + "CommandFailed (exit codes other than 124 and 137)"},
	}
}
