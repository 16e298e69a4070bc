// Package prodigy is the connector for Prodigy's dead-letter queue: the
// item files under ~/.prodigy/dlq/REPO/JOB/mapreduce/dlq/JOB/items/ and
// each job's index.json. It reads items as entries scoped by their job,
// and writes back the way `prodigy dlq retry` does for an item that
// succeeded: the item file removed and its id dropped from index.json,
// journaled first (.replayctl-writeback.jsonl in the job directory) so an
// interrupted write-back is finished by the next read of the source.
//
// It follows iepathos/prodigy at ef879f26a764 (src/cook/execution/dlq.rs: DeadLetteredItem
// with item_id, item_data, failure_history of FailureDetail, error_signature,
// reprocess_eligible, manual_review_required; the index written with
// serde_json::to_string_pretty: job_id, item_count, item_ids, updated_at).
//
// It must never write outside the source directory, never follow a link
// out of it, and never import another system's package, internal/replay
// or internal/server.
package prodigy
