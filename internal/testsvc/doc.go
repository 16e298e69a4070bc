// Package testsvc starts real servers for tests (and the benchmarks): PostgreSQL, Redis and RabbitMQ from
// the machine's packages, on free local ports, in temporary directories,
// stopped when the test ends. Outside CI a missing binary skips the test
// with a message; in CI (CI set) it fails it, so those tests always run.
// It is imported by tests only.
package testsvc
