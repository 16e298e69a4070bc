package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/replayctl/replayctl/internal/triage"
)

// Exit codes. Documented in README.md ("Exit codes"); scripts and cron jobs
// rely on them, so they never change meaning.
const (
	exitOK       = 0 // everything handled (reconcile: no failed dispatch; entries may wait for people)
	exitError    = 1 // a runtime error (I/O, store, target), or failing policy tests
	exitUsage    = 2 // bad flags or arguments, invalid rules.yaml or policies
	exitAwaiting = 3 // reconcile --strict: done, but entries wait for people (approval, review, quarantine)
	exitFailed   = 4 // reconcile: some replays failed or their outcome is unknown
	exitNotSent  = 5 // reconcile: it tried to replay, and not one attempt reached a target (target down)
)

// exitErr carries an exit code with an error; a nil err means the message
// was already printed.
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitErr) Unwrap() error { return e.err }

// usageError marks err as a usage error (exit 2) with a hint.
func usageError(format string, args ...any) error {
	return &exitErr{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// silent returns an error that only sets the exit code.
func silent(code int) error { return &exitErr{code: code} }

func exitCode(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitErr
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "replayctl:", ee.err)
		}
		return ee.code
	}
	var ce *triage.ConfigError
	if errors.As(err, &ce) {
		fmt.Fprintln(stderr, "replayctl: invalid configuration:")
		for _, p := range ce.Problems {
			fmt.Fprintln(stderr, "  "+p.String())
		}
		return exitUsage
	}
	fmt.Fprintln(stderr, "replayctl:", err)
	if strings.HasPrefix(err.Error(), "unknown command") {
		return exitUsage // cobra's, for a mistyped command
	}
	return exitError
}
