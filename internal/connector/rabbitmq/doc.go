// Package rabbitmq is the RabbitMQ dead-letter connector: it reads a
// dead-letter queue, replays a message to the queue that dead-lettered it,
// and acknowledges a message in the DLQ only once its entry is stored.
//
// Spec: rabbitmq:amqp://[USER:PASSWORD@]HOST:PORT/VHOST?queue=QUEUE, with
// optional prefetch=N (default 1000), wait=DURATION (how long a read waits
// for the next delivery before it stops, default 2s), timeout=DURATION (a
// replay's wait for the publisher confirm, and the longest a connection's
// handshake may take, at most 30s; default 30s) and
// error_header=NAME (a header holding the application's error, besides
// Spring AMQP's x-exception-message / x-exception-stacktrace). Without a
// user in the URL, RABBITMQ_USERNAME / RABBITMQ_PASSWORD are used. The
// password never appears in String(), an entry's Origin, an error or a
// result's detail.
//
// Reads: the queue's message count is taken when the read starts (a
// passive declare), then that many messages are consumed with manual acks
// and a bounded prefetch; the read stops early, with a note, when no
// delivery comes for wait. An entry's ID is the message-id (or a hash of
// the message when it has none) plus "#" and its x-death count, so a
// replay that is dead-lettered again is a new entry; its payload is an
// envelope that keeps the body byte for byte and every header with its
// AMQP type, so nothing is lost when the broker's TTL or max-length drops
// the message. Each delivery is acked once the runner says the entry is
// durably stored (Stored); a message never stored is requeued when the
// connection ends, and read again by the next run.
//
// Replay publishes to the default exchange with the routing key of the
// queue that dead-lettered the message (x-death's most recent queue), so
// other queues bound to the original exchange do not get a second copy;
// mandatory, with publisher confirms; headers and properties kept (the
// user-id property is dropped: the broker refuses it from another user),
// plus Idempotency-Key and replayctl-replay-count. A message that returns
// with those headers is linked to its ancestor through the entry labels
// replayctl.replay_of (the ancestor's idempotency key) and
// replayctl.replay_count.
//
// Tests run against the real rabbitmq-server (internal/testsvc).
package rabbitmq
