// Package brokermsg is what the message-broker connectors (RabbitMQ,
// Kafka, SQS) share and no other system needs: how a message body is kept
// byte for byte inside an entry's JSON payload, how the application's
// exception (Spring's x-exception-* headers, Spring Kafka's kafka_dlt-*,
// Kafka Connect's __connect.errors.*) becomes a reason code the triage
// taxonomy knows, and the names of the lineage stamps a replay carries.
//
// It never does I/O and never names a broker's client library: each
// connector converts its own headers to strings before asking here.
package brokermsg
