// Package server is replayctl's long-lived service: the REST API
// (Nexora-compatible dead letters, plan, reconcile runs, approvals, audit),
// the scheduled reconcile, Prometheus metrics and the server-rendered
// approval UI, behind bearer tokens mapped to users and roles.
//
// It is thin: every operation calls the same services as the CLI (replay,
// approval, audit), so no rule is implemented twice. It must never run two
// reconciles at once, and every mutating call is recorded with its user.
package server
