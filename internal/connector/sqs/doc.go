// Package sqs is the Amazon SQS dead-letter-queue connector: it receives a
// DLQ's messages with a short visibility timeout, replays a message to the
// DLQ's source queue, and deletes it from the DLQ only after the replay
// (or a person's resolve) is stored.
//
// Spec: sqs:QUEUE_URL, with optional region=REGION (else AWS_REGION,
// AWS_DEFAULT_REGION, or the region in an sqs.REGION.amazonaws.com host),
// visibility=DURATION (the receive's visibility timeout, default 30s, so
// messages a killed run had received reappear soon), wait=DURATION (each
// receive's long poll, default 1s; 0 polls short) and
// error_attribute=NAME (a message attribute holding the application's
// error, besides x-exception-message / x-exception-stacktrace). The URL's
// scheme and host are the endpoint, so a local SQS-compatible server
// works; credentials come from the AWS SDK's default chain and never
// appear in String(), an entry, an error or a result.
//
// Reads: ApproximateNumberOfMessages is taken when the read starts (a
// note says how many the DLQ held and how many were read); receives of up
// to 10 messages with every system and message attribute follow until one
// comes back empty or brings only messages already read (their
// visibility ran out: the DLQ has been gone round). An entry's ID is the
// MessageId (a replay that fails again comes back under a new one); its
// payload keeps the body, every message attribute and the system
// attributes, so a message SQS deletes after its retention period (at
// most 14 days) is still replayable. Classification: the application's
// error in x-exception-message / x-exception-stacktrace (or
// error_attribute) decides; without one the code is
// sqs_max_receive_count, unknown to the taxonomy: unrecognised, never
// auto-replayed.
//
// Replay sends to the source queue: the one the message's
// DeadLetterQueueSourceArn names (GetQueueUrl), else the only queue
// ListDeadLetterSourceQueues lists for the DLQ (several or none: a
// rules.yaml target must say). The body and message attributes are kept,
// plus Idempotency-Key and replayctl-replay-count; to a FIFO queue with
// the original MessageGroupId and the SHA-256 of the idempotency key as
// MessageDeduplicationId. SendMessage is never retried by the SDK: a
// resend goes through the ledger. A returning message is linked to its
// ancestor through the entry labels replayctl.replay_of and
// replayctl.replay_count.
//
// Settle deletes the message with the receipt handle of this run's
// receive; a message this run did not receive is deleted by a later run
// that receives it again (the write-back stays owed until then). Nothing
// is deleted before its entry is stored.
//
// Tests run against sqstest, a hand-made SQS-compatible server (AWS JSON
// 1.0) written from the SQS API reference; goaws v0.4.5 speaks only the
// query protocol.
package sqs
