package store

import (
	"time"
)

// Options configure a backend's open (bolt.Open, postgres.Open).
type Options struct {
	// ReadOnly opens without creating or changing the file (plan).
	ReadOnly bool
	// LockTimeout bounds the wait for another process's lock (default 1s).
	LockTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// AuditKey, when set, signs the audit chain head with HMAC-SHA256 on
	// every append (REPLAYCTL_AUDIT_KEY or --audit-key-file).
	AuditKey []byte
	// MaxBatchSize and MaxBatchDelay tune group commit of concurrent
	// Updates (defaults 8 and 1ms): one fsync serves many workers. On
	// PostgreSQL, MaxBatchSize sizes the connection pool instead.
	MaxBatchSize  int
	MaxBatchDelay time.Duration
}
