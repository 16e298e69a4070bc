// Package policy evaluates the Rego policies of policies/ with OPA for
// every proposed decision, and runs their *_test.rego tests.
//
// The policy may only make a decision stricter (triage enforces that); here
// we make sure it cannot reach the network or the runtime (http.send,
// net.lookup_ip_addr and opa.runtime are removed from its capabilities), and
// that any error, timeout or undefined result is an error, so the caller
// fails closed. This package never decides on its own.
package policy
