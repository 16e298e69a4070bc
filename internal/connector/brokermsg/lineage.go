package brokermsg

import (
	"strconv"
	"strings"

	"github.com/replayctl/replayctl/internal/entry"
)

// Every replay a broker connector sends carries three stamps (AMQP
// headers, Kafka record headers, SQS message attributes), and an entry
// read with them carries two labels and its lineage, so a replay that
// fails again and comes back to the DLQ (a new x-death count, a new
// offset, a new MessageId) is linked to the entry it came from and
// max_replays counts across the whole lineage (replay/lineage.go).
const (
	// HeaderKey is the idempotency key of the entry that was replayed.
	HeaderKey = "Idempotency-Key"
	// HeaderCount is how many times the message's lineage was replayed,
	// this replay included (1 for the first).
	HeaderCount = entry.ReplayCountLabel
	// HeaderLineage is the lineage of the entry that was replayed
	// (entry.LineageStamp: its lineage, else its own ref), the stamp the
	// webhook target sends too.
	HeaderLineage = entry.LineageLabel

	// LabelReplayOf, on an entry, is the idempotency key of the entry
	// whose replay this message is: its ancestor in the lineage.
	LabelReplayOf = "replayctl.replay_of"
	// LabelReplayCount, on an entry, is how many replays of its lineage
	// came before it (the stamp it arrived with).
	LabelReplayCount = "replayctl.replay_count"
)

// Lineage reads the stamps a message arrived with. ok is false when it
// carries no key (it never went through a replayctl replay). A count that
// is missing or not a number counts as 1: the key alone says it was
// replayed once.
func Lineage(key, count string) (ancestor string, n int, ok bool) {
	key = strings.TrimSpace(key)
	if key == "" {
		return "", 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(count))
	if err != nil || n < 1 {
		n = 1
	}
	return key, n, true
}

// SetLineage writes the lineage labels on labels (allocating it when nil).
func SetLineage(labels map[string]string, key, count string) map[string]string {
	anc, n, ok := Lineage(key, count)
	if !ok {
		return labels
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelReplayOf] = anc
	labels[LabelReplayCount] = strconv.Itoa(n)
	return labels
}

// NextCount is the HeaderCount a replay of an entry with these labels
// carries: one more than the count it arrived with.
func NextCount(labels map[string]string) int {
	s, ok := labels[LabelReplayCount]
	if !ok {
		return 1 // no replay before: skip Atoi's error value
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		n = 0
	}
	return n + 1
}

// ReadLineage puts e in the lineage a message arrived stamped with
// (HeaderLineage; "" when it carries none), as Cordum's connector does for
// a retry job: every member of a lineage names the same root. Ancestors
// stay empty: a broker's ids do not say which message a replay came from
// (the labels name its key), and the store's lineage record lists the
// members it read.
func ReadLineage(e *entry.Entry, stamp string) {
	if l := strings.TrimSpace(stamp); l != "" {
		e.Lineage = l
	}
}
