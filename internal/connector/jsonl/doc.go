// Package jsonl is the connector for replayctl's own JSON Lines export:
// one record a line (id, topic, reason_code, message, attempts,
// idempotency_key, labels, payload, first_failure, last_failure,
// source_state), decoded strictly so that a field replayctl does not know
// is reported, not ignored. It has no upstream: the format is
// replayctl's, documented in docs/connectors.md.
//
// It has no replay path, probe or write-back (ErrUnsupported).
package jsonl
