// Package connectortest is the suite every connector passes, run from
// each connector package's own tests (River's shared driver suite is the
// model): a connector hands it a way to build its replay path against a
// base URL, or its source and settle, and the suite checks the promises
// of the boundary: a redirect never commits and never carries a header
// to another host, a request the system read is never resent, an entry
// whose ids hold control characters is still sent, a settle is
// idempotent, what a connector reads it can also probe, no secret reaches
// an error. It also holds the helpers those tests share.
//
// It must never import a connector: connectors import it from their tests.
package connectortest
