// Package source is the runner's view of the DLQs it reads: Parse turns a
// --source value into a connector (through internal/connector/registry),
// All reads several as one stream. A connector's write-back is its
// connector.Settler (connector.SettlerOf). Each system's record shapes,
// paging and write-back live in its own package under internal/connector.
//
// It must never drop a record and never name a system: what a system
// writes is its connector's business, whether an entry is replayed is
// triage's.
package source
