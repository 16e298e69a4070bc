// Package connector is the contract between replayctl and one DLQ system.
//
// A system (Cordum, Nexora, Prodigy, a JSONL export, RabbitMQ, Kafka, SQS,
// or a generic HTTP/exec target) is one package under internal/connector/
// that holds everything replayctl knows about it: its record formats, its
// paging, its reason codes, its replay endpoint, its settle calls, its
// console links, and a fake of the system for tests. Nothing outside that
// package names the system, except the registry that lists connectors.
//
// The parts a system lacks answer ErrUnsupported. The types the runner and
// the connectors share (Outcome, Request, Result, Dispatcher, Prober) live
// here, below internal/replay: no connector imports replay, server or
// another system's package.
package connector

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/replayctl/replayctl/internal/entry"
)

// ErrUnsupported is returned (wrapped) by a part of the contract that a
// system does not have: a JSONL export has no replay endpoint, a Cordum
// file dump cannot be settled.
var ErrUnsupported = errors.New("not supported by this connector")

// Outcome of one dispatch.
type Outcome int

// Outcomes. Only Retry and NotSent may be dispatched again automatically.
const (
	Succeeded Outcome = iota // the target has it (2xx, or 409: it already had it)
	Failed                   // definite failure: the target refused it; never retried
	Retry                    // certainly not committed (5xx, connection refused): retry with backoff
	Unknown                  // may or may not have happened (timeout after sending): never retried blindly
	// HandledElsewhere: the system says the entry is no longer
	// dead-lettered (Cordum 404 on retry, Nexora 409/404): someone else
	// replayed, resolved or deleted it. Never retried; the entry ends
	// resolved and its key counts as committed.
	HandledElsewhere
	// NotSent: the attempt provably never reached the target (connection
	// refused, DNS or TLS failure, request not fully written, a command
	// that did not start). Retried like Retry, but it does not count
	// against max_replays: an outage cannot burn the budget.
	NotSent
)

func (o Outcome) String() string {
	return [...]string{"succeeded", "failed", "retry", "outcome_unknown", "handled_elsewhere", "not_sent"}[o]
}

// Retryable reports whether the runner may schedule another attempt.
func (o Outcome) Retryable() bool { return o == Retry || o == NotSent }

// Request is one replay to send.
type Request struct {
	Entry   *entry.Entry
	Key     string // the entry's idempotency key, preserved exactly
	Attempt int    // 1 for the first dispatch of the key, counted across runs
}

// Result is what a dispatch learned.
type Result struct {
	Outcome Outcome
	Status  int    // HTTP status or exit code, when there is one
	Detail  string // response excerpt or error, never a credential
	// NewJobID is the job the system created for the replay (Cordum's
	// retry answers {"job_id": NEW}); recorded in the outcome's audit.
	NewJobID string
	// SourceUpdated: the system's own endpoint already took the entry out
	// of its DLQ (Cordum retry deletes it, Nexora marks it REPLAYED), so
	// replayctl must not write back.
	SourceUpdated bool
	// TargetDown: the answer says the target itself is unavailable
	// (connection refused, a timeout, 502/503/504): it counts towards
	// opening the target's circuit breaker.
	TargetDown bool
}

// Dispatcher sends one replay.
type Dispatcher interface {
	Dispatch(ctx context.Context, r Request) Result
}

// ProbeResult is what a compensating read found.
type ProbeResult int

// Probe results.
const (
	ProbeCommitted    ProbeResult = iota // the target has the key / the system replayed it
	ProbeNotCommitted                    // it does not
	ProbeInconclusive                    // anything else
)

// Prober asks a target whether a key was committed.
type Prober interface {
	Probe(ctx context.Context, key string) (ProbeResult, string)
}

// EntryProber is a Prober that needs the entry, not only its key: the
// systems know their entries by their own id.
type EntryProber interface {
	ProbeEntry(ctx context.Context, e *entry.Entry) (ProbeResult, string)
}

// Source yields the entries of one DLQ, one at a time, in a deterministic
// order. A record that cannot be decoded is still yielded, as an entry with
// DecodeError set. A fatal error is yielded once as (zero Entry, err) and
// iteration stops.
type Source interface {
	String() string // the spec as given by the user, credentials redacted
	Entries(ctx context.Context) iter.Seq2[entry.Entry, error]
}

// StoredRef reports whether the store holds an entry under ref
// (entry.Entry.Ref).
type StoredRef func(ctx context.Context, ref string) (bool, error)

// NameKeeper is a source that names some entries otherwise than an earlier
// replayctl did (a file's undecodable record: by the file's canonical path,
// once by the path as typed). Given the store's StoredRef, it yields an
// entry the store already holds under the earlier name under that name, so
// that its stored record (a quarantine, its shown id) stays the one entry.
// Without it, entries take the new name.
type NameKeeper interface {
	KeepStoredNames(StoredRef)
}

// Settlement is what replayctl tells a system it did with an entry.
type Settlement struct {
	// Replayed: the entry was delivered; the system may drop it from its DLQ.
	Replayed bool
	// Reason is why an entry was resolved without a replay (a person's reason).
	Reason string
}

// Settler tells the system what replayctl did with an entry (Prodigy:
// remove the item and update index.json; Nexora: resolve with a reason;
// a broker: ack/delete). Settle is idempotent: settling an entry the
// system no longer holds is not an error.
type Settler interface {
	Settle(ctx context.Context, e *entry.Entry, s Settlement) error
}

// NothingToSettle is a connector whose system keeps no DLQ for replayctl
// to settle (a file of records is not the system; a Kafka topic keeps its
// records until retention): its Settle tells nobody anything.
type NothingToSettle interface {
	NothingToSettle()
}

// SettlerOf is the Settler through which the runner tells src's system
// what it did with an entry (its write-back); ok is false for a source
// that has nothing to tell: no Settle, or NothingToSettle.
func SettlerOf(src any) (s Settler, ok bool) {
	if _, none := src.(NothingToSettle); none {
		return nil, false
	}
	s, ok = src.(Settler)
	return s, ok
}

// Code is a reason code a system writes, with the class replayctl gives it
// and where upstream writes it (repo@commit file:line).
type Code struct {
	Code string
	// Class is transient, poison, governance or unknown_commit; generic
	// for a code that says nothing (the status and the message decide);
	// unrecognised for a code listed for the record only: it stays out
	// of the taxonomy and is never replayed automatically.
	Class string
	Where string
}

// Link is how the console names an entry and where the system shows it.
type Link struct {
	Name string // how the system calls the entry (job id, dead-letter id, JOB/ITEM)
	URL  string // the system's own page for it, when it has one
}

// Connector is one DLQ system as a whole. Parts a system lacks return
// ErrUnsupported (Replay: a Result whose Outcome is Failed and whose
// Detail says so; a connector without a replay path is not offered as a
// native route).
type Connector interface {
	Source
	// Replay sends the entry back through the system's own path (Cordum's
	// retry, Nexora's replay, a broker's original queue).
	Replay(ctx context.Context, r Request) Result
	// ProbeEntry asks the system whether a replay of the entry happened.
	ProbeEntry(ctx context.Context, e *entry.Entry) (ProbeResult, string)
	Settler
	// Ref names the entry and links to it in the system.
	Ref(e *entry.Entry) Link
	// Codes lists the reason codes the system writes.
	Codes() []Code
}

// UsageError is a --source value that cannot be used. Hint says what
// would.
type UsageError struct {
	Spec string // the value as given
	Err  error  // what is wrong with it
	Hint string // what to do instead
}

func (e *UsageError) Error() string {
	return fmt.Sprintf("--source %q: %v; %s", e.Spec, e.Err, e.Hint)
}

func (e *UsageError) Unwrap() error { return e.Err }
