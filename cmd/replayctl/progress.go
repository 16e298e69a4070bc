package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/runs"
	"github.com/replayctl/replayctl/internal/store"
)

// progress shows a bar (known total) or a counting spinner on a terminal's
// stderr during long runs, through progressbar; it prints nothing when
// stderr is not a terminal (cron, pipes, tests).
type progress struct {
	bar *progressbar.ProgressBar // nil: not a terminal
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func startProgress(w io.Writer, verb string) *progress { return startProgressOf(w, verb, -1) }

// startProgressOf shows progress towards total entries (-1: unknown).
func startProgressOf(w io.Writer, verb string, total int64) *progress {
	if !isTerminal(w) {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(verb),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("entries"),
		progressbar.OptionSetPredictTime(total > 0),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

func (p *progress) add(n int64) {
	if p.bar != nil {
		_ = p.bar.Add64(n)
	}
}

func (p *progress) describe(s string) {
	if p.bar != nil {
		p.bar.Describe(s)
	}
}

func (p *progress) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// cliRun is a run of this process (a bulk operation or a reconcile): a
// stored record others can follow (`runs show`) and cancel (`runs
// cancel`), and a progress bar on a terminal.
type cliRun struct {
	t    *runs.Tracker // nil when the store keeps no runs
	prog *progress
	verb string
	// partial: the work went through without delivering all it set out
	// to (a bulk replay); the run ends "partial" unless stopped or failed.
	partial bool
}

// delivered records a bulk replay's delivery: its summary, and whether it
// delivered every entry it planned to replay.
func (c *cliRun) delivered(d *replay.Delivery) {
	if d == nil {
		return
	}
	c.partial = !d.Complete()
	if c.t != nil {
		c.t.SetSummary(d.String())
	}
}

// startCLIRun records the run and returns the context the work must use:
// it is cancelled when someone cancels the run.
func startCLIRun(ctx context.Context, st store.Backend, op, actor string, total int, w io.Writer) (*cliRun, context.Context, error) {
	verb, bar := op, int64(-1) // -1: a spinner while the total is unknown
	if total > 0 {
		bar = int64(total)
	}
	c := &cliRun{prog: startProgressOf(w, verb, bar), verb: verb}
	t, rctx, err := runs.Start(ctx, st, runs.Options{Op: op, Trigger: "cli", Actor: actor, Owner: st.Instance(), Total: total})
	if err != nil {
		c.prog.done()
		return nil, nil, err
	}
	t.OnChange = func(r runs.Record) {
		c.prog.add(1)
		c.prog.describe(fmt.Sprintf("%s %s: %d ok, %d failed, %d held", verb, r.ID, r.Succeeded, r.Failed, r.Held))
	}
	c.t = t
	return c, rctx, nil
}

func (c *cliRun) observe(o runs.Outcome) {
	if c.t != nil {
		c.t.Observe(context.Background(), o)
		return
	}
	c.prog.add(1)
}

// id is the run's id ("" when the store keeps no runs).
func (c *cliRun) id() string {
	if c.t == nil {
		return ""
	}
	return c.t.ID()
}

// finishAs records the run's end in state (aborted_by_canary).
func (c *cliRun) finishAs(ctx context.Context, state string) runs.Record {
	c.prog.done()
	if c.t == nil {
		return runs.Record{State: state}
	}
	rec, serr := c.t.FinishAs(ctx, state, nil)
	if serr != nil && !errors.Is(serr, store.ErrReadOnly) {
		rec.Error = firstNonEmpty(rec.Error, "run record not saved: "+serr.Error())
	}
	return rec
}

// finish records how the run ended: interrupted when it stopped early
// without a cancel (Ctrl-C), else as runs.Finish decides.
func (c *cliRun) finish(ctx context.Context, err error, stopped bool) runs.Record {
	c.prog.done()
	if c.t == nil {
		return runs.Record{}
	}
	state := ""
	switch cancelled := c.t.Record().CancelRequested; {
	case stopped && !cancelled:
		state = runs.Interrupted
	case c.partial && !stopped && !cancelled && err == nil:
		state = runs.Partial
	}
	rec, serr := c.t.FinishAs(ctx, state, err)
	if serr != nil && !errors.Is(serr, store.ErrReadOnly) {
		rec.Error = firstNonEmpty(rec.Error, "run record not saved: "+serr.Error())
	}
	return rec
}
