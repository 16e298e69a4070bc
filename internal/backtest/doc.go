// Package backtest answers "what would this rules/policy change have done?"
// It re-decides the decisions recorded in the audit trail (or entries read
// from sources) with a candidate engine, from each decision's recorded
// inputs, and counts what changes: from which action to which, by rule and
// failure signature, with samples, and the entries that would now be
// replayed automatically.
//
// It must never act: it writes nothing, to the store or to a target. It
// streams: memory holds a few batches per worker and the bounded tallies,
// never the decisions themselves.
package backtest
