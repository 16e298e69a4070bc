// Package audit defines the append-only, hash-chained record of every
// decision replayctl makes or a person takes: who, what, why, with which
// policy snapshot, and what the ledger said before and after.
//
// Each stored record holds the hash of the one before it, so changing,
// deleting or reordering a record breaks the chain, which Verify finds.
// This package computes and checks hashes; stores keep the bytes. It must
// never rewrite a record.
package audit
