// Package source reads dead-letter queues and yields their records as
// normalised entries: Cordum DLQ dumps, Prodigy item directories, Nexora
// dead-letter list responses and replayctl's own JSON Lines.
//
// It owns the mapping from each DLQ's record shape to entry.Entry, and the
// one write a source allows (Prodigy: removing a replayed item). It must
// never drop a record: a record it cannot decode is still yielded, marked
// undecodable and naming where it was. It must never load a whole DLQ into
// memory: files are streamed one record at a time. And it makes no
// decisions: whether an entry is replayed is triage's business, not the
// reader's.
package source
