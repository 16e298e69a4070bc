package replay

import "github.com/replayctl/replayctl/internal/entry"

// Order (issue 28: "Kafka replays of one original partition keep their
// original order"). A connector names the sequence an entry belongs to
// in its entry.OrderLabel (Kafka: the original topic and partition). A
// run on a single-process store (passWindows) treats that name as it
// treats a key or a ref: a window never holds two entries of one
// sequence, and never one whose sequence the window still in flight
// holds. So an entry is dispatched only after the one read before it in
// its sequence has its outcome, and in the order the feed gave them (a
// source's read order: a DLT partition's offsets). Entries of different
// sequences still go in parallel, up to --max-parallel.
//
// Not covered: a shared store's workers (each claims on its own) and
// bulk replays (`dlq replay` with a selection) do not order; a retry
// within the run goes after the entries that followed it.

// orderKey is the window key of e's sequence ("" when it has none); its
// prefix keeps it apart from the "k" (idempotency key) and "r" (ref)
// window keys.
func orderKey(e *entry.Entry) string {
	if k := e.Labels[entry.OrderLabel]; k != "" {
		return "o" + k
	}
	return ""
}

// orderBlocks reports whether e cannot join the window being built: its
// sequence is in it (seen) or in the window in flight (nil: none). It
// marks the sequence seen when it can.
func orderBlocks(e *entry.Entry, seen map[string]bool, inflight *running) bool {
	o := orderKey(e)
	if o == "" {
		return false
	}
	if seen[o] || inflight != nil && inflight.keys[o] {
		return true
	}
	seen[o] = true
	return false
}
