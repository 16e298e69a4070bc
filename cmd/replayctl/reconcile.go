package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/connector/registry"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/triage"
)

// targetFlags route replays when rules.yaml has no targets.
type targetFlags struct {
	url, probe string
}

// router routes by --target, else entries read from a running system
// (the run's, or the stored entry's origin) through that system's own
// replay, else by rules.yaml targets.
func (f *targetFlags) router(rules *triage.Rules, srcs ...source.Source) replay.Router {
	var def *replay.Route
	creds := replay.CredentialsFromEnv(os.Getenv)
	if f.url != "" {
		// The flag was checked when set, so this cannot fail.
		def, _ = replay.ParseTarget(f.url, f.probe, creds)
	}
	return replay.NewOriginRouter(replay.NewRulesRouter(rules, def), def != nil, creds, srcs...)
}

// forEntry finds a stored entry's source again (registry.Finder), so a
// replay outside a run writes back as a run's does.
func forEntry() func(*entry.Entry) (source.Source, bool) {
	f := &registry.Finder{Creds: replay.CredentialsFromEnv(os.Getenv)}
	return func(e *entry.Entry) (source.Source, bool) { return f.For(e) }
}

func newReconcileCmd(s *streams) *cobra.Command {
	var (
		eng     engineFlags
		src     sourceFlags
		db      dbFlags
		actor   actorFlag
		tgt     targetFlags
		outF    string
		par     int
		window  int
		rate    float64
		limit   int
		dry     bool
		verbose bool
		lease   time.Duration
		// Scheduling: how long a run may wait for due retries, whether
		// entries left for people fail the run (exit 3), the breakers.
		maxWait         time.Duration
		strict          bool
		breakerFailures uint32
		breakerCooldown time.Duration
		// approvers.yaml, as serve loads it: its expiry sets how long the
		// approval requests this run raises stay open.
		approvers approversFlag
	)
	var metricsFile, pushURL string
	cmd := &cobra.Command{
		Use:   "reconcile --source KIND:PATH... [--db replayctl.db] [--target URL] [flags]",
		Short: "Ingest, decide and act: replay, quarantine or ask for approval",
		Long: `reconcile is the scheduled run: it reads the sources, decides every entry as
plan does, and acts through the idempotency ledger:

  auto_replay       dispatch to the entry's target (rules.yaml targets, or
                    --target URL) with its idempotency key; a retryable
                    failure schedules the next attempt (the rule's capped
                    backoff) for a later run, up to max_replays
  quarantine        hold the entry with its owner until a person releases it
  require_approval  open an approval request for the rule's approver group
  manual_review     leave it for a person
  skip              already committed, or handled at the source

Before each dispatch the intent is fsynced to the ledger; a key that succeeded
is never dispatched again, and one whose outcome is unknown is never retried
without a probe or a person. Running reconcile twice is safe.

Retries are not slept: a run dispatches each due entry once and moves on;
entries whose retry is not due yet, and those of a target whose circuit
breaker is open, stay pending for a later run (cron, a systemd timer, serve).
--max-wait D lets one run wait up to D for retries that come due.

Exit status: 0 the run completed with no failed dispatch (entries may wait
for people: the summary says how many; --strict makes that exit 3), 4 some
replays failed or have an unknown outcome (a request sent that timed out
is one), 5 not one attempt reached a working target (each was not sent, or
answered 502/503/504: the target is down; the entries stay pending), 1 on
errors or when interrupted (the next run continues), 2 on usage or
configuration errors.`,
		Example: `  replayctl reconcile --source cordum:testdata/cordum/dlq.jsonl --target http://localhost:9000/replay
  replayctl reconcile --source prodigy:$HOME/.prodigy/dlq/myrepo --rate 20 --max-parallel 10 -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(outF)
			if err != nil {
				return err
			}
			if window < 0 {
				return usageError("--window must not be negative")
			}
			if par < 1 {
				return usageError("--max-parallel must be at least 1")
			}
			if rate < 0 || limit < 0 || maxWait < 0 || breakerCooldown < 0 {
				return usageError("--rate, --limit, --max-wait and --breaker-cooldown must not be negative")
			}
			if dry {
				return runPlan(cmd, s, &eng, &src, db.path, db.dsn, format)
			}
			if db.remote.enabled() {
				if err := refuseIgnored(cmd, s, "--server", "the server runs with its own sources, targets, rules, policy, approvers and store, and the token says who acts",
					"source", "target", "probe", "rules", "policies", "policy-timeout", "approvers", "db", "store", "as",
					"max-parallel", "window", "rate", "limit", "lease", "max-wait", "breaker-failures", "breaker-cooldown",
					"metrics-file", "push-url", "verbose"); err != nil {
					return err
				}
				return remoteReconcile(cmd, s, &db.remote, format, strict)
			}
			srcs, err := src.open(s.log)
			if err != nil {
				return err
			}
			apprCfg, err := approval.LoadConfig(approvers.path)
			if err != nil {
				return err
			}
			db.writers = par
			engine, st, err := openActing(cmd.Context(), &eng, &db)
			if err != nil {
				return err
			}
			defer st.Close()
			source.KeepStoredNames(srcs, storedRef(st))
			var rm *server.RunMetrics
			if metricsFile != "" || pushURL != "" {
				if rm, err = server.NewRunMetrics(st, metricsFile, time.Now); err != nil {
					return err
				}
			}
			// A run others can follow and cancel (`runs show|cancel`).
			run, rctx, err := startCLIRun(cmd.Context(), st, "reconcile", actor.as, 0, s.err)
			if err != nil {
				return err
			}
			out := bufio.NewWriter(s.out)
			defer out.Flush()
			r := &replay.Reconciler{
				Engine: engine, Store: st, Router: tgt.router(engine.Rules, srcs...), Actor: actor.as,
				MaxParallel: par, Window: window, Rate: rate, Limit: limit, Lease: lease, ApprovalTTL: apprCfg.Expiry,
				MaxWait: maxWait, Breakers: &replay.Breakers{Failures: breakerFailures, Cooldown: breakerCooldown},
				OnHoldExpired: func(x replay.ExpiredHold) {
					s.log.Warn("group hold expired: its entries are decided again", "group", x.Group, "reason", x.Reason,
						"until", x.Until, "audit", x.Audit)
				},
				OnEntry: func(res replay.EntryResult) {
					run.observe(res.RunOutcome())
					if rm != nil {
						rm.ObserveEntry(res)
					}
					if verbose && format == "table" {
						printResultRow(out, &res)
					}
				},
			}
			if verbose && format == "table" {
				fmt.Fprintf(out, resultRow, "ENTRY", "CLASS", "ACTION", "STATUS", "WHY")
			}
			rep, err := r.Run(rctx, srcs)
			run.finish(cmd.Context(), err, rep != nil && rep.Interrupted)
			if rm != nil {
				merr := rm.Finish(err)
				if merr == nil && pushURL != "" {
					merr = rm.Push(pushURL)
				}
				if merr != nil && err == nil {
					err = merr
				}
			}
			if err != nil {
				// A run stopped by an error (a source that failed
				// mid-read, a broker restarted) still says what it did
				// before it stopped: what was delivered, held or unknown.
				if rep != nil {
					if format == "json" {
						if jerr := writeJSON(out, rep); jerr != nil {
							return errors.Join(err, jerr)
						}
					} else {
						fmt.Fprintln(out, "\nrun stopped early by an error (below); what it did before that:")
						printReport(out, rep)
					}
				}
				return err
			}
			if format == "json" {
				if err := writeJSON(out, rep); err != nil {
					return err
				}
			} else {
				printReport(out, rep)
			}
			return reconcileExit(rep, strict)
		},
	}
	f := cmd.Flags()
	src.register(f)
	eng.register(f, s.err)
	db.register(f)
	actor.register(f)
	approvers.register(f)
	f.Var(targetURL{&tgt.url}, "target", "send every replay to this URL (HTTP POST), or cordum:URL / nexora:URL through that system's own replay endpoint, overriding rules.yaml targets")
	f.Var(httpURL{&tgt.probe}, "probe", "with --target: URL for compensating reads (GET ?key=K: 200 committed, 404 not)")
	f.IntVar(&par, "max-parallel", 5, "dispatches in flight at once")
	f.IntVar(&window, "window", 0, "most entries handled together: on bbolt their intents (then outcomes) are committed together (0: max(4 x --max-parallel, 64)); on PostgreSQL a worker holds this many claimed entries (0: 4 x --max-parallel); a kill leaves up to this many outcome_unknown")
	f.Float64Var(&rate, "rate", 0, "at most this many dispatches per second to each destination (0: no limit)")
	f.IntVar(&limit, "limit", 0, "handle at most this many entries this run (0: all)")
	f.BoolVar(&dry, "dry-run", false, "decide and print, change nothing (same as plan)")
	f.DurationVar(&lease, "lease", 2*time.Minute, "with --store: how long a worker's claim on an entry lasts, renewed while it waits to be sent (must exceed a dispatch's timeout by a third: a dispatch starts with at least 3/4 of it ahead)")
	f.DurationVar(&maxWait, "max-wait", 0, "wait up to this long for retries that come due during the run (0: never wait; a later run takes them)")
	f.BoolVar(&strict, "strict", false, "exit 3 when entries wait for people (approval, manual review, quarantine), as before")
	f.Uint32Var(&breakerFailures, "breaker-failures", replay.DefaultBreakerFailures, "consecutive target-down answers (refused, timeout, 502/503/504) that open a target's circuit breaker")
	f.DurationVar(&breakerCooldown, "breaker-cooldown", replay.DefaultBreakerCooldown, "how long an open breaker holds its target's entries before one trial request")
	f.BoolVarP(&verbose, "verbose", "v", false, "list every entry's result")
	f.StringVarP(&outF, "output", "o", "table", "output format: table or json")
	f.StringVar(&metricsFile, "metrics-file", "", "after the run, write Prometheus metrics to this file (node_exporter textfile format, written atomically; counters continue from the file's previous values)")
	f.StringVar(&pushURL, "push-url", "", "after the run, push its metrics to this Prometheus Pushgateway (job replayctl_reconcile)")
	return cmd
}

// reconcileExit maps a completed run to its exit code. Entries waiting
// for people are the normal steady state of a DLQ, so by default they do
// not fail the run (a Kubernetes CronJob or systemd timer would mark every
// run failed); --strict restores exit 3. Retries scheduled for later and
// targets behind an open breaker are not failures either, but a run whose
// every attempt found the target down (not sent, or 502/503/504 or a
// timeout from a gateway in front of it) did nothing it was scheduled
// for: exit 5, so the scheduler reports it.
func reconcileExit(rep *replay.Report, strict bool) error {
	switch {
	case rep.Interrupted:
		return &exitErr{code: exitError, err: errors.New("interrupted: the next run continues where this one stopped")}
	case rep.Replays.Failed+rep.Replays.Unknown > 0:
		return silent(exitFailed)
	case rep.Replays.Dispatched > 0 && max(rep.Replays.NotSent, rep.Replays.TargetDown) == rep.Replays.Dispatched:
		return silent(exitNotSent)
	case strict && rep.AwaitingPeople > 0:
		return silent(exitAwaiting)
	}
	return nil
}

const resultRow = "%-30s %-14s %-16s %-17s %s\n"

func printResultRow(w io.Writer, r *replay.EntryResult) {
	fmt.Fprintf(w, resultRow, clip(r.Decision.EntryID, 30), r.Decision.Class, r.Final, r.Status, clip(firstNonEmpty(r.Reason, lastOf(r.Decision.Reasons)), 80))
}

func printReport(w io.Writer, rep *replay.Report) {
	printSummary(w, rep.Summary)
	fmt.Fprintf(w, "\nreplays: %d dispatched, %d succeeded, %d failed, %d outcome unknown, %d retried\n",
		rep.Replays.Dispatched, rep.Replays.Succeeded, rep.Replays.Failed, rep.Replays.Unknown, rep.Replays.Retried)
	if rep.Replays.TargetDown > 0 {
		fmt.Fprintf(w, "target down: %d attempt(s) found the target down (not sent, 502/503/504 or a timeout)\n", rep.Replays.TargetDown)
	}
	if rep.Replays.NotSent > 0 {
		fmt.Fprintf(w, "not sent: %d attempt(s) never reached the target (not counted in max_replays)\n", rep.Replays.NotSent)
	}
	if rep.Waiting > 0 {
		fmt.Fprintf(w, "waiting: %d entr(ies) with a retry due later (%d held by an open circuit breaker); next due %s\n",
			rep.Waiting, rep.Unavailable, rep.NextAttempt.UTC().Format(time.RFC3339))
	}
	if rep.Ingested > 0 || rep.StaleClaims > 0 {
		fmt.Fprintf(w, "shared store: %d new entries ingested, %d claims lost to an expired lease\n", rep.Ingested, rep.StaleClaims)
	}
	if rep.HeldElsewhere > 0 {
		fmt.Fprintf(w, "held elsewhere: %d entr(ies) under another worker's lease, until %s at the latest (a live worker is handling them, or a dead one's lease must end first); the next run takes what is left\n",
			rep.HeldElsewhere, rep.HeldUntil.UTC().Format(time.RFC3339))
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	for _, x := range rep.HoldsExpired {
		fmt.Fprintf(w, "group hold expired: %s (%s, until %s) is open again, its entries decided afresh (audit record %d)\n",
			x.Group, x.Reason, x.Until.UTC().Format(time.RFC3339), x.Audit)
	}
	if rep.Recovered > 0 {
		fmt.Fprintf(w, "recovered: %d interrupted dispatch(es) marked outcome_unknown\n", rep.Recovered)
	}
	if rep.ProbedCommitted > 0 {
		fmt.Fprintf(w, "probes: %d key(s) found already committed\n", rep.ProbedCommitted)
	}
	if rep.NoTarget > 0 {
		fmt.Fprintf(w, "no target: %d entr(ies) to replay had no target (add targets to rules.yaml or use --target)\n", rep.NoTarget)
	}
	fmt.Fprintf(w, "awaiting people: %d (approval requests opened this run: %d)\n", rep.AwaitingPeople, rep.ApprovalsOpened)
	fmt.Fprintf(w, "decisions recorded: %d; took %s\n", rep.DecisionsWritten, rep.Duration)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func lastOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// remoteReconcile starts a run on a server (its sources and targets) and
// waits for it.
func remoteReconcile(cmd *cobra.Command, s *streams, rf *remoteFlags, format string, strict bool) error {
	var started struct {
		ID string `json:"id"`
	}
	if err := rf.call(cmd.Context(), "POST", "/api/reconcile", nil, nil, &started); err != nil {
		return err
	}
	run, err := waitRun(cmd, rf, started.ID)
	if err != nil {
		return err
	}
	if run.Report == nil {
		return fmt.Errorf("run %s %s: %s", started.ID, run.State, run.Error)
	}
	if format == "json" {
		if err := writeJSON(s.out, run.Report); err != nil {
			return err
		}
	} else {
		printReport(s.out, run.Report)
	}
	if run.Error != "" {
		return fmt.Errorf("run %s failed: %s", started.ID, run.Error)
	}
	return reconcileExit(run.Report, strict)
}

// httpURL is a flag holding an http(s) URL, checked when parsed so a typo
// is a usage error (exit 2), not a run that retries an unusable target.
type httpURL struct{ s *string }

func (u httpURL) String() string {
	if u.s == nil {
		return ""
	}
	return *u.s
}

func (u httpURL) Set(v string) error {
	p, err := url.Parse(v)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", v)
	}
	*u.s = v
	return nil
}

func (httpURL) Type() string { return "URL" }
