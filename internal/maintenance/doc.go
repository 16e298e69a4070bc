// Package maintenance holds serve's background duties, each a named
// Service with Start and Stop: recovery of abandoned dispatches, the audit
// sealer, approval reminders, retention and the reconcile schedule. (A
// claim's lease is renewed by the runner itself, before each dispatch:
// replay's keepClaim.) A Group starts them in order, stops them in reverse order and
// keeps each one's last run and error for /readyz and /metrics.
//
// A duty only calls the code that owns its work (replay.Recover, the
// store's SealAudit and Prune, the server's reminders): it never decides
// on an entry itself, never sleeps in a test (ticks are injected), and a
// Stop returns once its goroutine has ended.
package maintenance
