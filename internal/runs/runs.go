package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/store"
)

// States of a run.
const (
	Running   = "running"
	Succeeded = "succeeded"
	Failed    = "failed"
	Cancelled = "cancelled"
	// Interrupted: stopped early without a cancel (Ctrl-C, shutdown).
	Interrupted = "interrupted"
	// Partial: a bulk replay that went through to the end without
	// delivering every entry it set out to replay (some scheduled for a
	// retry, held by a breaker, failed or refused).
	Partial = "partial"
	// AbortedByCanary: a canary replay's first slice failed more than
	// allowed; the rest was not started (replay/canary.go).
	AbortedByCanary = "aborted_by_canary"
)

// Sentinel errors.
var (
	// ErrNotFound: no run with that id.
	ErrNotFound = errors.New("no such run")
	// ErrFinished: the run is no longer running (a cancel comes too late).
	ErrFinished = errors.New("run already finished")
)

// Store is what runs need of the state store (bolt.Bolt, postgres.Postgres).
// Records are opaque JSON to the store.
type Store interface {
	UpdateRun(ctx context.Context, id string, fn func(cur []byte) ([]byte, error)) error
	Run(ctx context.Context, id string) ([]byte, error)
	Runs(ctx context.Context, fn func(id string, rec []byte) error) error
}

// Record is a run as it is stored and shown (`runs show -o json`,
// GET /api/runs/{id}).
type Record struct {
	ID      string `json:"id"`
	Op      string `json:"operation"` // bulk-replay, bulk-resolve, reconcile
	Trigger string `json:"trigger,omitempty"`
	Actor   string `json:"actor"`
	Owner   string `json:"owner,omitempty"` // the process running it (host:pid)
	State   string `json:"state"`
	// Total is 0 while unknown (a reconcile reads its sources as it goes).
	Total     int `json:"total"`
	Done      int `json:"done"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// Held: entries left waiting for people (approval, review, quarantine).
	Held            int       `json:"held"`
	Rate            float64   `json:"rate_per_second"`
	ETA             string    `json:"eta,omitempty"`
	Started         time.Time `json:"started"`
	Updated         time.Time `json:"updated"`
	Finished        time.Time `json:"finished,omitzero"`
	CancelRequested bool      `json:"cancel_requested,omitempty"`
	CancelledBy     string    `json:"cancelled_by,omitempty"`
	Error           string    `json:"error,omitempty"`
	// Summary says what a finished run did in the operator's words (a
	// partial bulk replay: delivered, scheduled, held by a breaker, ...).
	Summary string `json:"summary,omitempty"`
}

// Outcome is how one handled entry counts.
type Outcome int

// Outcomes.
const (
	Other Outcome = iota // handled, nothing to count (committed, skipped, over a cap)
	Success
	Failure
	Held
)

// Options start a run.
type Options struct {
	ID      string // default: run-<UTC time>-<4 random bytes>
	Op      string
	Trigger string
	Actor   string
	Owner   string
	Total   int
	Now     func() time.Time // default time.Now
	// Every is how often progress is written and a cancel request from
	// another process looked for (default 1s of Now).
	Every time.Duration
}

// Tracker follows one run: counts, saves progress and watches for a
// cancel request.
type Tracker struct {
	st     Store
	now    func() time.Time
	every  time.Duration
	cancel context.CancelFunc

	mu    sync.Mutex
	rec   Record
	saved time.Time
	// OnChange, when set, sees the record after every entry (a progress
	// bar). It is called with the lock held: keep it quick.
	OnChange func(Record)
}

// NewID returns a run id that sorts by start time.
func NewID(now time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("run-%s-%s", now.UTC().Format("20060102T150405.000000Z"), hex.EncodeToString(b))
}

// Start records a new running run and returns its tracker and a context
// that is cancelled when the run is cancelled (here or from elsewhere).
func Start(ctx context.Context, st Store, o Options) (*Tracker, context.Context, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Every <= 0 {
		o.Every = time.Second
	}
	now := o.Now().UTC()
	if o.ID == "" {
		o.ID = NewID(now)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &Tracker{st: st, now: o.Now, every: o.Every, cancel: cancel,
		rec: Record{ID: o.ID, Op: o.Op, Trigger: o.Trigger, Actor: o.Actor, Owner: o.Owner, State: Running,
			Total: o.Total, Started: now, Updated: now}}
	t.mu.Lock()
	err := t.saveLocked(ctx)
	t.mu.Unlock()
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("record run %s: %w", o.ID, err)
	}
	return t, ctx, nil
}

// ID is the run's id.
func (t *Tracker) ID() string { return t.rec.ID }

// Record is a copy of the run as it stands.
func (t *Tracker) Record() Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rec
}

// SetTotal sets how many entries the run will handle.
func (t *Tracker) SetTotal(n int) {
	t.mu.Lock()
	t.rec.Total = n
	t.mu.Unlock()
}

// Observe counts one handled entry and, every Every, saves progress and
// picks up a cancel request made elsewhere.
func (t *Tracker) Observe(ctx context.Context, o Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rec.Done++
	switch o {
	case Success:
		t.rec.Succeeded++
	case Failure:
		t.rec.Failed++
	case Held:
		t.rec.Held++
	}
	now := t.now()
	t.progressLocked(now)
	if now.Sub(t.saved) >= t.every {
		// A failed progress write is not worth stopping the run for; the
		// final write reports the counts.
		_ = t.saveLocked(context.WithoutCancel(ctx))
	}
	if t.OnChange != nil {
		t.OnChange(t.rec)
	}
}

// SetSummary records what the run did, for its final record.
func (t *Tracker) SetSummary(s string) {
	t.mu.Lock()
	t.rec.Summary = s
	t.mu.Unlock()
}

// Cancel asks the run to stop (in this process): no new dispatch starts.
func (t *Tracker) Cancel(by string) {
	t.mu.Lock()
	t.rec.CancelRequested = true
	if t.rec.CancelledBy == "" {
		t.rec.CancelledBy = by
	}
	t.mu.Unlock()
	t.cancel()
}

// Finish records the run's end: cancelled when a cancel was asked for,
// failed with err, else succeeded.
func (t *Tracker) Finish(ctx context.Context, err error) (Record, error) {
	return t.FinishAs(ctx, "", err)
}

// FinishAs is Finish with the final state given (the server's "skipped");
// "" lets Finish decide.
func (t *Tracker) FinishAs(ctx context.Context, state string, err error) (Record, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.progressLocked(now)
	t.rec.Finished = now.UTC()
	if err != nil && !(t.rec.CancelRequested && errors.Is(err, context.Canceled)) {
		t.rec.Error = err.Error()
	}
	switch {
	case state != "":
		t.rec.State = state
	case t.rec.CancelRequested:
		t.rec.State = Cancelled
	case err != nil:
		t.rec.State = Failed
	default:
		t.rec.State = Succeeded
	}
	t.rec.ETA = ""
	serr := t.saveLocked(context.WithoutCancel(ctx))
	t.cancel()
	return t.rec, serr
}

func (t *Tracker) progressLocked(now time.Time) {
	t.rec.Updated = now.UTC()
	el := now.Sub(t.rec.Started).Seconds()
	t.rec.Rate, t.rec.ETA = 0, ""
	if el > 0 && t.rec.Done > 0 {
		t.rec.Rate = float64(t.rec.Done) / el
		if t.rec.Total > t.rec.Done {
			t.rec.ETA = time.Duration(float64(t.rec.Total-t.rec.Done) / t.rec.Rate * float64(time.Second)).Round(time.Second).String()
		}
	}
}

// saveLocked writes the record, keeping a cancel request another process
// stored meanwhile (and acting on it).
func (t *Tracker) saveLocked(ctx context.Context) error {
	t.saved = t.now()
	err := t.st.UpdateRun(ctx, t.rec.ID, func(cur []byte) ([]byte, error) {
		if cur != nil {
			var stored Record
			if err := json.Unmarshal(cur, &stored); err == nil && stored.CancelRequested && !t.rec.CancelRequested {
				t.rec.CancelRequested, t.rec.CancelledBy = true, stored.CancelledBy
			}
		}
		return json.Marshal(t.rec)
	})
	if t.rec.CancelRequested {
		t.cancel()
	}
	return err
}

// Get reads one run.
func Get(ctx context.Context, st Store, id string) (Record, error) {
	b, err := st.Run(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return Record{}, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("run %s: undecodable record: %w", id, err)
	}
	return r, nil
}

// List returns up to limit runs (0: all), newest first. An undecodable
// record is listed with its id and the error rather than dropped.
func List(ctx context.Context, st Store, limit int) ([]Record, error) {
	out := []Record{}
	stop := errors.New("enough")
	err := st.Runs(ctx, func(id string, b []byte) error {
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			r = Record{ID: id, Error: "undecodable record: " + err.Error()}
		}
		out = append(out, r)
		if limit > 0 && len(out) >= limit {
			return stop
		}
		return nil
	})
	if errors.Is(err, stop) {
		err = nil
	}
	return out, err
}

// Cancel stores a cancel request for a running run; the process running
// it stops starting dispatches when it next saves progress (at most Every
// later), and lets those in flight record their outcome.
func Cancel(ctx context.Context, st Store, id, by string) (Record, error) {
	var r Record
	err := st.UpdateRun(ctx, id, func(cur []byte) ([]byte, error) {
		if cur == nil {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		if err := json.Unmarshal(cur, &r); err != nil {
			return nil, fmt.Errorf("run %s: undecodable record: %w", id, err)
		}
		if r.State != Running {
			return nil, fmt.Errorf("%w: %s is %s", ErrFinished, id, r.State)
		}
		if !r.CancelRequested {
			r.CancelRequested, r.CancelledBy = true, by
		}
		return json.Marshal(r)
	})
	return r, err
}

// Orphaned marks a run recorded as running whose process is known to be
// gone (with a bbolt file only one process holds it: a reader that opened
// it, or a server that owns it, knows any other owner ended): it is shown
// interrupted, with why, and is no longer cancellable.
func Orphaned(r Record) Record {
	if r.State == Running {
		r.State = Interrupted
		r.Error = "its process (" + r.Owner + ") ended without finishing it; run the same operation again to resume"
		r.ETA = ""
	}
	return r
}

// Describe is the state with, for an interrupted run, why.
func (r Record) Describe() string {
	if r.State == Interrupted && r.Error != "" {
		return r.State + ": " + r.Error
	}
	return r.State
}
