// Command replayctl is a policy-driven replay controller for dead-letter
// queues: it triages dead-lettered entries, decides with rules.yaml and a
// Rego policy what to do with each, and replays safely through an
// idempotency ledger. See README.md.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// run executes one command line and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := &termSafe{w: stdout}
	cmd := newRootCmd(&streams{in: stdin, out: out, err: stderr})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return exitCode(stderr, err)
}
