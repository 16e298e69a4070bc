// Package postgres is the PostgreSQL backend of store.Backend, shared by
// many workers: claims with leases and fencing tokens, an audit chain its
// writers append to and a sealer links (pg_audit.go), counters and
// filter columns kept by the writing transaction. Open migrates the schema
// forward and refuses a newer one. It never decides anything.
package postgres
