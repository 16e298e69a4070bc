// Package records reads dead-letter records out of a file or a page, in
// whatever layout a system writes them (one object, a stream of objects,
// an array, {"items": [...]}, JSON Lines), and turns each into an entry
// through the system's own decode function. It is the generic part every
// file- and page-based connector shares; it names no system.
//
// A record that cannot be decoded is still yielded, as an entry with
// DecodeError set, named by where it was (a file) or by its own id or a
// hash of its bytes (a live page). It must never drop a record, never
// buffer more than MaxRecord bytes of one, and never block on a file that
// is not a regular file.
package records
