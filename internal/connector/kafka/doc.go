// Package kafka is the Kafka dead-letter-topic connector: it reads a DLT
// under replayctl's own consumer group, replays a record to its original
// topic with the same key, and commits the group's offset only past
// records whose entries are stored.
//
// Spec: kafka:HOST:PORT[,HOST:PORT...]?topic=DLT_TOPIC&group=GROUP, with
// optional wait=DURATION (how long a read waits for records it knows are
// there before it stops, default 5s), timeout=DURATION (a replay's
// produce deadline, default 30s) and error_header=NAME (a header holding
// the application's error when none of the known ones has it). Security (auth.go): tls=1 (the system's
// roots, or tls_ca=FILE, a PEM bundle to trust) and sasl=plain,
// scram-sha-256 or scram-sha-512, with the user and password from
// KAFKA_USERNAME and KAFKA_PASSWORD only (sasl=plain only with tls=1); the
// Origin keeps the options, never the credentials.
//
// Reads: the group's committed offset (else the partition's start) and
// the partition's end offset are taken when the read starts, so the read
// is complete and ends (no long poll on an empty topic): the run notes how
// many records the DLT held past the group's offsets and how many it read.
// The partitions are consumed directly (no group membership, so no
// rebalance can move a partition away mid-read); offsets are committed
// for GROUP. An entry's ID is TOPIC/PARTITION/OFFSET: a replay that fails
// again comes back at a new offset, as a new entry. Its payload keeps the
// record key, value and every header (in order, repeated keys too) byte
// for byte, so a retention.ms that drops the record loses nothing.
// Classification reads Spring Kafka's DeadLetterPublishingRecoverer
// headers (kafka_dlt-exception-fqcn, -cause-fqcn, -message, -stacktrace,
// and kafka_dlt-key-exception-* for a key that failed to deserialize;
// kafka_exception-* and kafka_original-* from its retry topics),
// Kafka Connect's (__connect.errors.exception.class.name,
// .exception.message, .exception.stacktrace) and Spring Cloud Stream's
// Kafka binder's (x-exception-fqcn, -message, -stacktrace); the original
// topic from kafka_dlt-original-topic, kafka_original-topic,
// __connect.errors.topic or x-original-topic.
//
// Commits (Stored): an offset is committed only once every record before
// it that the read yielded is stored; a record yielded but never stored
// (a kill) is read again by the next run.
//
// Replay produces to the original topic with the same record key (the
// default partitioner hashes it as the Java client does, so it lands on
// the same partition, and one partition's records keep their order) and
// the same headers, plus Idempotency-Key and replayctl-replay-count;
// idempotent producer, acks=all. A record that returns with those
// headers is linked to its ancestor through the entry labels
// replayctl.replay_of and replayctl.replay_count.
//
// Tests run against franz-go's kfake cluster.
package kafka
