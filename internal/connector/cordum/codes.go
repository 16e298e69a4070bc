package cordum

import "github.com/replayctl/replayctl/internal/connector"

// Where the newest Cordum (finmaster1/cordum e00450ed; the lines below were
// read at the stored commits named, the issue-27 lines at e00450ed) writes
// each code, and its job statuses (DLQEntry.Status = pb.JobStatus.String(),
// engine.go emitDLQ; older records write "DENIED"), which triage looks up
// as job_status_<status>:
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
//
// JOB_STATUS_FAILED and JOB_STATUS_UNSPECIFIED say nothing about the
// cause: they are generic, and the message decides.
const (
	engineGo     = "finmaster1/cordum@04c77a08 core/controlplane/scheduler/engine.go"
	engineNewGo  = "finmaster1/cordum@e00450ed core/controlplane/scheduler/engine.go"
	delegationGo = "finmaster1/cordum@14cb4411 core/controlplane/scheduler/delegation_dispatch.go:19-27"
	jobStatus    = "finmaster1/cordum@e00450ed engine.go emitDLQ: DLQEntry.Status = pb.JobStatus.String()"
)

var codes = []connector.Code{
	// The scheduler: capacity that frees up by itself.
	{Code: "no_workers", Class: "transient", Where: engineGo + " reasonCodeForSchedulingError"},
	{Code: "max_scheduling_retries", Class: "transient", Where: engineGo + " processJob, attempts >= maxSchedulingRetries"},
	{Code: "pool_overloaded", Class: "transient", Where: engineGo + " reasonCodeForSchedulingError"},
	{Code: "tenant_limit", Class: "transient", Where: engineGo + " reasonCodeForSchedulingError"},
	{Code: "dispatch_failed", Class: "transient", Where: engineGo + " reasonCodeForSchedulingError"},
	{Code: "schema_registry_unavailable", Class: "transient", Where: engineGo + " failSchemaValidation"},
	// The request or the routing is wrong; a replay fails the same way
	// until someone fixes it.
	{Code: "schema_validation_failed", Class: "poison", Where: engineGo + " schema enforcement"},
	{Code: "schema_invalid", Class: "poison", Where: engineGo + " schema enforcement"},
	{Code: "schema_not_found", Class: "poison", Where: engineGo + " schema enforcement"},
	{Code: "unknown_topic", Class: "poison", Where: engineGo + " processJob, topic not registered"},
	{Code: "no_pool_mapping", Class: "poison", Where: engineGo + " reasonCodeForSchedulingError"},
	// A policy, a plan or a person said no.
	{Code: "policy_denied", Class: "governance", Where: engineGo + " processJob policy decision"},
	{Code: "policy_violation", Class: "governance", Where: engineGo + " processJob policy decision"},
	{Code: "safety_denied", Class: "governance", Where: engineGo + " processJob SafetyDeny"},
	{Code: "safety_unknown", Class: "governance", Where: engineNewGo + ":1605-1621 processJob default decision"},
	{Code: "approval_rejected", Class: "governance", Where: engineNewGo + " replayApprovalPublish; gateway handlers_approvals.go:1566-1586, DLQ tap handlers_stream.go:328-357"},
	{Code: "redelivery_dlq_retry", Class: "governance", Where: engineGo + " terminal-state redelivery"},
	{Code: "tier_limit_exceeded", Class: "governance", Where: engineGo + " reasonCodeForSchedulingError"},
	{Code: "delegation.*", Class: "governance", Where: delegationGo + " revoked/expired/invalid/scope_exceeded/chain_too_deep/audience_mismatch, missing_dispatch_token, dispatch_reverify_unavailable"},
	// The job ran (its output was held, or a worker failed it repeatedly),
	// so its side effects may already have happened.
	{Code: "output_quarantined", Class: "unknown_commit", Where: engineGo + " output policy held a result"},
	{Code: "output_quarantined_async", Class: "unknown_commit", Where: engineGo + " output policy held a result"},
	{Code: "max_retries_exceeded", Class: "unknown_commit", Where: engineGo + " processJob, policy max_retries"},
	{Code: "quarantine_failed", Class: "unknown_commit", Where: engineNewGo + ":2632-2642 async quarantine gave up, job SUCCEEDED"},
	{Code: "quarantine_panic_failed", Class: "unknown_commit", Where: engineNewGo + ":2500-2532 job SUCCEEDED"},
	// Terminal job statuses, looked up as job_status_<status>.
	{Code: "job_status_timeout", Class: "transient", Where: jobStatus},
	{Code: "job_status_failed_retryable", Class: "transient", Where: jobStatus},
	{Code: "job_status_failed_fatal", Class: "poison", Where: jobStatus},
	{Code: "job_status_denied", Class: "governance", Where: jobStatus},
	{Code: "job_status_cancelled", Class: "governance", Where: jobStatus},
	{Code: "job_status_succeeded", Class: "unknown_commit", Where: jobStatus},
	{Code: "job_status_completed", Class: "unknown_commit", Where: jobStatus},
	{Code: "job_status_failed", Class: "generic", Where: jobStatus},
	{Code: "job_status_unspecified", Class: "generic", Where: jobStatus},
}

// Codes lists the reason codes and job statuses Cordum writes, with the
// class replayctl gives each. A worker's own code (handleJobResult
// res.ErrorCode, e00450ed:2400-2404) is in no list: it stays unrecognised.
func Codes() []connector.Code { return append([]connector.Code(nil), codes...) }
