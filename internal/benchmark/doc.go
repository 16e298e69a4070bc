// Package benchmark measures replayctl against its physical limits and
// prints a table: every figure is a ratio against a baseline measured in
// the same run, on the same data and machine, because these machines are
// noisy and only ratios mean something. It is run by `make bench`
// (`replayctl bench`); `make test` runs it once in quick mode so it cannot
// rot. It never asserts a time.
package benchmark
