package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/runs"
	"github.com/replayctl/replayctl/internal/triage"
)

var (
	errRunning   = errors.New("a reconcile is already running")
	errElsewhere = errors.New("another replayctl instance is reconciling this store: skipped")
)

// Run is one reconcile or bulk operation, as GET /api/runs/{id} shows it:
// the stored run record (id, operation, trigger (schedule, api or ui),
// actor, state (running, succeeded, failed, cancelled, skipped), progress)
// and, for runs of this process, the report.
type Run struct {
	runs.Record
	Report *replay.Report     `json:"report,omitempty"`
	Bulk   *replay.BulkReport `json:"bulk,omitempty"`

	tracker *runs.Tracker
}

// runner allows one reconcile at a time; a scheduled run that finds one
// in progress is skipped and counted, never stacked.
type runner struct {
	srv    *Server
	mu     sync.Mutex
	base   context.Context
	seq    int
	runs   map[string]*Run
	order  []string
	active *Run
	wg     sync.WaitGroup
	recs   runs.Store // where run records are kept (runStore)
}

// runStore is where run records are kept: the state store (so other
// processes see them); this process's memory for a server built without
// one. Chosen once, when the server is built: handlers read it
// concurrently.
func runStore(st Store) runs.Store {
	if st == nil {
		return runs.NewMemory()
	}
	return st
}

func (r *runner) store() runs.Store { return r.recs }

const keepRuns = 100

func (r *runner) start(trigger, actor string) (*Run, error) {
	return r.startReconcile(trigger, actor, nil)
}

// startReconcile starts a reconcile on the configuration its request
// already loaded (nil: the run loads it).
func (r *runner) startReconcile(trigger, actor string, loaded *loadedConfig) (*Run, error) {
	return r.startWork(trigger, actor, "reconcile", func(ctx context.Context, run *Run) error {
		return r.reconcile(ctx, run, loaded)
	})
}

// startWork runs work as the one operation in progress (reconciles and
// bulk operations share the slot: they would compete for the same keys).
// It returns a copy of the run as it started (the run itself is the
// runner's, written by its goroutine), never nil.
func (r *runner) startWork(trigger, actor, op string, work func(context.Context, *Run) error) (*Run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active != nil {
		active := *r.active
		return &active, fmt.Errorf("%w (run %s since %s)", errRunning, active.ID, active.Started.Format(time.RFC3339))
	}
	base := r.base
	if base == nil {
		base = context.Background()
	}
	r.seq++
	owner := "serve " + r.srv.cfg.Store.Instance()
	tracker, ctx, err := runs.Start(base, r.store(), runs.Options{Op: op, Trigger: trigger, Actor: actor, Owner: owner, Now: r.srv.cfg.Now})
	if err != nil {
		return &Run{}, err
	}
	run := &Run{Record: tracker.Record(), tracker: tracker}
	started := *run
	r.runs[run.ID] = run
	r.order = append(r.order, run.ID)
	if len(r.order) > keepRuns {
		delete(r.runs, r.order[0])
		r.order = r.order[1:]
	}
	r.active = run
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.execute(ctx, run, work)
	}()
	return &started, nil
}

func (r *runner) get(id string) (Run, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.runs[id]
	if !ok {
		return Run{}, false
	}
	out := *run
	if run.State == runs.Running {
		out.Record = run.tracker.Record() // live progress
	}
	return out, true
}

// cancel asks a run to stop: at once when this process runs it, else by
// the stored request the owning process picks up.
func (r *runner) cancel(ctx context.Context, id, by string) (runs.Record, error) {
	r.mu.Lock()
	run, ok := r.runs[id]
	if ok && run.State == runs.Running {
		run.tracker.Cancel(by)
		rec := run.tracker.Record()
		r.mu.Unlock()
		return rec, nil
	}
	r.mu.Unlock()
	if !r.srv.cfg.Store.Features().Shared {
		// Only this process holds the store: a run it is not running has
		// no process left to cancel it.
		rec, err := runs.Get(ctx, r.store(), id)
		if err != nil {
			return rec, err
		}
		rec = runs.Orphaned(rec)
		return rec, fmt.Errorf("%w: %s is %s", runs.ErrFinished, id, rec.Describe())
	}
	return runs.Cancel(ctx, r.store(), id, by)
}

func (r *runner) wait() { r.wg.Wait() }

// reconcile is a run's work: one reconcile over the server's sources.
func (r *runner) reconcile(ctx context.Context, run *Run, loaded *loadedConfig) error {
	s := r.srv
	// With a shared store several serve processes run: one reconcile at a
	// time across all of them (a database advisory lock; bbolt's file lock
	// already keeps every other process out).
	release, ok, err := s.cfg.Store.TryRunLock(ctx)
	if err != nil {
		return err
	}
	if !ok {
		s.metrics.runs.WithLabelValues("skipped_elsewhere").Inc()
		return errElsewhere
	}
	defer release()
	if loaded == nil {
		engine, snap, err := s.engine(ctx)
		if err != nil {
			return err
		}
		loaded = &loadedConfig{engine: engine, snap: snap}
	}
	engine, snap := loaded.engine, loaded.snap
	if err := s.cfg.Store.PutSnapshot(ctx, snap.ID, snap); err != nil {
		return err
	}
	engine.Policy = s.metrics.timePolicy(engine.Policy)
	rc := &replay.Reconciler{Engine: engine, Store: s.cfg.Store, Router: s.cfg.Router(engine.Rules),
		Actor: run.Actor, MaxParallel: s.cfg.MaxParallel, Rate: s.cfg.Rate, ApprovalTTL: s.cfg.Approvers.Expiry, Breakers: s.cfg.Breakers,
		Clock: nowClock{now: s.cfg.Now}, // the server's clock, as its approvals and the console read it
		OnHoldExpired: func(x replay.ExpiredHold) {
			s.cfg.Logger.Warn("group hold expired: its entries are decided again", "group", x.Group, "reason", x.Reason,
				"until", x.Until, "audit", x.Audit, "run", run.ID)
		},
		OnEntry: func(res replay.EntryResult) {
			s.metrics.observeEntry(res)
			run.tracker.Observe(ctx, res.RunOutcome())
		}}
	rep, err := rc.Run(ctx, s.cfg.Sources)
	r.mu.Lock()
	run.Report = rep
	r.mu.Unlock()
	if rep != nil {
		s.notifyApprovals(ctx, run.ID, rep.ApprovalsOpened)
	}
	if err == nil {
		s.cfg.Logger.Info("reconcile done", "run", run.ID, "entries", rep.Summary.Total,
			"replayed", rep.Replays.Succeeded, "awaiting", rep.AwaitingPeople, "took", rep.Duration)
	}
	return err
}

func (r *runner) execute(ctx context.Context, run *Run, work func(context.Context, *Run) error) {
	s := r.srv
	m := s.metrics
	err := work(ctx, run)
	state := ""
	if errors.Is(err, errElsewhere) {
		state = "skipped"
	}
	r.mu.Lock()
	bulk := run.Bulk
	r.mu.Unlock()
	if bulk != nil && bulk.Delivery != nil {
		// A bulk replay succeeds only when it delivered every entry it set
		// out to replay (issue 30).
		run.tracker.SetSummary(bulk.Delivery.String())
		if !bulk.Delivery.Complete() && err == nil && bulk.Stopped == "" && !run.tracker.Record().CancelRequested {
			state = runs.Partial
		}
	}
	if errors.Is(err, replay.ErrAbortedByCanary) {
		state = runs.AbortedByCanary
	}
	rec, serr := run.tracker.FinishAs(ctx, state, err)
	if serr != nil {
		s.cfg.Logger.Error("run record not saved", "run", run.ID, "err", serr)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	run.Record = rec
	m.runDuration.Observe(run.Finished.Sub(run.Started).Seconds())
	switch {
	case run.State == "skipped":
	case run.State == runs.Partial:
		m.runs.WithLabelValues("partial").Inc()
		s.cfg.Logger.Warn("run partial", "run", run.ID, "operation", run.Op, "summary", run.Summary)
	case run.State == runs.AbortedByCanary:
		m.runs.WithLabelValues(runs.AbortedByCanary).Inc()
		s.cfg.Logger.Warn("run aborted by its canary", "run", run.ID, "operation", run.Op, "err", err)
	case run.State == runs.Cancelled:
		m.runs.WithLabelValues("cancelled").Inc()
		s.cfg.Logger.Warn("run cancelled", "run", run.ID, "operation", run.Op, "by", run.CancelledBy, "done", run.Done)
	case err != nil:
		m.runs.WithLabelValues("failed").Inc()
		s.cfg.Logger.Error("run failed", "run", run.ID, "operation", run.Op, "err", err)
	default:
		run.State = "succeeded"
		m.runs.WithLabelValues("succeeded").Inc()
		if run.Op == "reconcile" {
			m.lastSuccess.WithLabelValues().Set(float64(run.Finished.Unix()))
		}
	}
	r.active = nil
}

// schedule starts a run every interval until ctx is done.
func (r *runner) schedule(ctx context.Context, every time.Duration) {
	r.mu.Lock()
	r.base = ctx
	r.mu.Unlock()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := r.start("schedule", "replayctl-scheduler"); errors.Is(err, errRunning) {
			r.srv.metrics.runs.WithLabelValues("skipped_overrun").Inc()
			r.srv.cfg.Logger.Warn("scheduled reconcile skipped: the previous run is still going")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SetBase sets the context runs started through the API use (cancelled on
// shutdown).
func (s *Server) SetBase(ctx context.Context) {
	s.runs.mu.Lock()
	s.runs.base = ctx
	s.runs.mu.Unlock()
}

var _ triage.Policy = timedPolicy{}

// handleListRuns lists stored runs, newest first (?limit=N, default 50).
func (s *Server) handleListRuns(w http.ResponseWriter, r *http.Request) {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "bad_request", "limit must be a positive number")
			return
		}
		limit = n
	}
	list, err := runs.List(r.Context(), s.runs.store(), limit)
	if err != nil {
		serviceError(w, err)
		return
	}
	// This process's runs show live progress; with a store only this
	// process can hold (bbolt), any other run still marked running has no
	// process left.
	shared := s.cfg.Store.Features().Shared
	for i := range list {
		if run, ok := s.runs.get(list[i].ID); ok {
			list[i] = run.Record
		} else if !shared {
			list[i] = runs.Orphaned(list[i])
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": list})
}

// handleStoredRun answers GET /api/runs/{id} from the stored record.
func (s *Server) handleStoredRun(w http.ResponseWriter, r *http.Request) {
	rec, err := runs.Get(r.Context(), s.runs.store(), r.PathValue("id"))
	if errors.Is(err, runs.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	if err != nil {
		serviceError(w, err)
		return
	}
	if !s.cfg.Store.Features().Shared {
		rec = runs.Orphaned(rec) // not this process's: its owner is gone
	}
	writeJSON(w, http.StatusOK, Run{Record: rec})
}

// handleCancelRun asks a run to stop (202): no new dispatch starts, those
// in flight record their outcome. 404 unknown, 409 already finished.
func (s *Server) handleCancelRun(w http.ResponseWriter, r *http.Request) {
	var body struct{}
	if !readJSON(w, r, &body) {
		return
	}
	rec, err := s.runs.cancel(r.Context(), r.PathValue("id"), user(r).User)
	switch {
	case errors.Is(err, runs.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, runs.ErrFinished):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case err != nil:
		serviceError(w, err)
	default:
		s.cfg.Logger.Info("run cancel requested", "run", rec.ID, "by", user(r).User)
		writeJSON(w, http.StatusAccepted, rec)
	}
}
