package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

var (
	errRunning   = errors.New("a reconcile is already running")
	errElsewhere = errors.New("another replayctl instance is reconciling this store: skipped")
)

// Run is one reconcile run, as GET /api/runs/{id} shows it.
type Run struct {
	ID       string             `json:"id"`
	Op       string             `json:"operation"` // reconcile, bulk-replay, bulk-resolve
	Trigger  string             `json:"trigger"`   // schedule, api or ui
	Actor    string             `json:"actor"`
	State    string             `json:"state"` // running, succeeded, failed
	Started  time.Time          `json:"started"`
	Finished time.Time          `json:"finished,omitzero"`
	Report   *replay.Report     `json:"report,omitempty"`
	Bulk     *replay.BulkReport `json:"bulk,omitempty"`
	Error    string             `json:"error,omitempty"`
	// CancelledBy names who cancelled the run (state "cancelled").
	CancelledBy string `json:"cancelled_by,omitempty"`
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
	// cancels stops a running run (the console's Cancel).
	cancels map[string]context.CancelFunc
}

const keepRuns = 100

func (r *runner) start(trigger, actor string) (*Run, error) {
	return r.startWork(trigger, actor, "reconcile", r.reconcile)
}

// startWork runs work as the one operation in progress (reconciles and
// bulk operations share the slot: they would compete for the same keys).
func (r *runner) startWork(trigger, actor, op string, work func(context.Context, *Run) error) (*Run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active != nil {
		return r.active, fmt.Errorf("%w (run %s since %s)", errRunning, r.active.ID, r.active.Started.Format(time.RFC3339))
	}
	base := r.base
	if base == nil {
		base = context.Background()
	}
	r.seq++
	run := &Run{ID: fmt.Sprintf("run-%d-%d", r.srv.cfg.Now().Unix(), r.seq), Op: op, Trigger: trigger, Actor: actor,
		State: "running", Started: r.srv.cfg.Now().UTC()}
	r.runs[run.ID] = run
	r.order = append(r.order, run.ID)
	if len(r.order) > keepRuns {
		delete(r.runs, r.order[0])
		r.order = r.order[1:]
	}
	r.active = run
	ctx, cancel := context.WithCancel(base)
	if r.cancels == nil {
		r.cancels = map[string]context.CancelFunc{}
	}
	r.cancels[run.ID] = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		r.execute(ctx, run, work)
	}()
	return run, nil
}

func (r *runner) get(id string) (Run, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.runs[id]
	if !ok {
		return Run{}, false
	}
	return *run, true
}

func (r *runner) wait() { r.wg.Wait() }

// reconcile is a run's work: one reconcile over the server's sources.
func (r *runner) reconcile(ctx context.Context, run *Run) error {
	s := r.srv
	// With a shared store several serve processes run: one reconcile at a
	// time across all of them (a database advisory lock).
	if sh, ok := s.cfg.Store.(store.Shared); ok {
		release, ok, err := sh.TryRunLock(ctx)
		if err != nil {
			return err
		}
		if !ok {
			s.metrics.runs.WithLabelValues("skipped_elsewhere").Inc()
			return errElsewhere
		}
		defer release()
	}
	engine, snap, err := s.engine(ctx)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.PutSnapshot(ctx, snap.ID, snap); err != nil {
		return err
	}
	engine.Policy = s.metrics.timePolicy(engine.Policy)
	rc := &replay.Reconciler{Engine: engine, Store: s.cfg.Store, Router: s.cfg.Router(engine.Rules),
		Actor: run.Actor, MaxParallel: s.cfg.MaxParallel, Rate: s.cfg.Rate, ApprovalTTL: s.cfg.Approvers.Expiry,
		OnEntry: s.metrics.observeEntry, Breakers: s.cfg.Breakers}
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
	r.mu.Lock()
	defer r.mu.Unlock()
	run.Finished = s.cfg.Now().UTC()
	delete(r.cancels, run.ID)
	m.runDuration.Observe(run.Finished.Sub(run.Started).Seconds())
	if run.CancelledBy != "" {
		run.State = "cancelled"
		if err != nil && !errors.Is(err, context.Canceled) {
			run.Error = err.Error()
		}
	} else if errors.Is(err, errElsewhere) {
		run.State, run.Error = "skipped", err.Error()
	} else if err != nil {
		run.State, run.Error = "failed", err.Error()
		m.runs.WithLabelValues("failed").Inc()
		s.cfg.Logger.Error("run failed", "run", run.ID, "operation", run.Op, "err", err)
	} else {
		run.State = "succeeded"
		m.runs.WithLabelValues("succeeded").Inc()
		if run.Op == "reconcile" {
			m.lastSuccess.Set(float64(run.Finished.Unix()))
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
