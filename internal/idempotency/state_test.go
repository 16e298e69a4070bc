package idempotency

import (
	"errors"
	"testing"
	"time"
)

func TestApplyFollowsTheStateMachine(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	all := []State{None, Decided, Dispatching, Succeeded, Failed, OutcomeUnknown}
	legal := map[[2]State]bool{
		{None, Decided}: true, {Decided, Decided}: true, {Decided, Dispatching}: true, {Decided, Succeeded}: true,
		{Dispatching, Succeeded}: true, {Dispatching, Failed}: true, {Dispatching, OutcomeUnknown}: true,
		{Dispatching, Decided}: true, {Failed, Decided}: true, {OutcomeUnknown, Succeeded}: true,
		{OutcomeUnknown, Decided}: true,
	}
	for _, from := range all {
		for _, to := range all {
			var cur *Record
			if from != None {
				cur = &Record{Key: "k", State: from, PayloadHash: "h"}
			}
			_, err := Apply(cur, Transition{Key: "k", From: from, To: to, PayloadHash: "h"}, now)
			if legal[[2]State{from, to}] {
				if err != nil {
					t.Errorf("%s -> %s: unexpected error %v", show(from), show(to), err)
				}
			} else if !errors.Is(err, ErrIllegal) {
				t.Errorf("%s -> %s: got %v, want ErrIllegal", show(from), show(to), err)
			}
		}
	}
}

func TestSucceededIsTerminal(t *testing.T) {
	for _, to := range []State{Decided, Dispatching, Failed, OutcomeUnknown, Succeeded} {
		_, err := Apply(&Record{Key: "k", State: Succeeded}, Transition{Key: "k", From: Succeeded, To: to}, time.Now())
		if !errors.Is(err, ErrIllegal) {
			t.Errorf("succeeded -> %s: got %v, want ErrIllegal", to, err)
		}
	}
}

func TestOutcomeUnknownNeverGoesStraightToDispatching(t *testing.T) {
	_, err := Apply(&Record{Key: "k", State: OutcomeUnknown}, Transition{Key: "k", From: OutcomeUnknown, To: Dispatching}, time.Now())
	if !errors.Is(err, ErrIllegal) {
		t.Fatalf("got %v, want ErrIllegal", err)
	}
}

func TestApplyIsCompareAndSet(t *testing.T) {
	cur := &Record{Key: "k", State: Dispatching}
	_, err := Apply(cur, Transition{Key: "k", From: Decided, To: Dispatching}, time.Now())
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("stale from: got %v, want ErrConflict", err)
	}
	_, err = Apply(nil, Transition{Key: "k", From: Decided, To: Dispatching}, time.Now())
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("missing record: got %v, want ErrConflict", err)
	}
}

func TestApplyCountsReplaysAndKeepsPayload(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	r, err := Apply(nil, Transition{Key: "k", To: Decided, EntryRef: "cordum:j1", PayloadHash: "h1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if r, err = Apply(&r, Transition{Key: "k", From: Decided, To: Dispatching}, t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if r.Replays != i {
			t.Fatalf("after dispatch %d: replays = %d", i, r.Replays)
		}
		if r, err = Apply(&r, Transition{Key: "k", From: Dispatching, To: Decided, Error: "HTTP 503"}, t0); err != nil {
			t.Fatal(err)
		}
	}
	if r.PayloadHash != "h1" || r.EntryRef != "cordum:j1" || r.LastError != "HTTP 503" || !r.Created.Equal(t0) {
		t.Fatalf("record lost data: %+v", r)
	}
	if _, err := Apply(&r, Transition{Key: "k", From: Decided, To: Dispatching, PayloadHash: "other"}, t0); !errors.Is(err, ErrPayloadMismatch) {
		t.Fatalf("different payload: got %v, want ErrPayloadMismatch", err)
	}
}

// An outcome must be booked against the attempt and owner that made the
// dispatch: a stale outcome (an earlier attempt, or another process's) is
// refused, never written over a later attempt (issue 14: the first
// dispatch's 200 was booked against the second).
func TestOutcomeIsACompareAndSetOnAttemptAndOwner(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	dec := &Record{Key: "k", State: Decided, PayloadHash: "h", Replays: 1}
	cur, err := Apply(dec, Transition{Key: "k", From: Decided, To: Dispatching, Owner: "host:1:a"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Owner != "host:1:a" || cur.Replays != 2 {
		t.Fatalf("claim recorded owner %q attempt %d, want host:1:a attempt 2", cur.Owner, cur.Replays)
	}
	for _, tr := range []Transition{
		{Key: "k", From: Dispatching, To: Succeeded, Owner: "host:1:a", Attempt: 1},
		{Key: "k", From: Dispatching, To: Succeeded, Owner: "host:2:b", Attempt: 2},
	} {
		if _, err := Apply(&cur, tr, now); !errors.Is(err, ErrConflict) {
			t.Errorf("stale outcome %+v: got %v, want ErrConflict", tr, err)
		}
	}
	next, err := Apply(&cur, Transition{Key: "k", From: Dispatching, To: Succeeded, Owner: "host:1:a", Attempt: 2}, now)
	if err != nil || next.State != Succeeded {
		t.Fatalf("current outcome refused: %v", err)
	}
}
