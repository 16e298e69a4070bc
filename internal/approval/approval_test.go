package approval

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

type bundle struct {
	svc *Service
	st  *bolt.Bolt
	now time.Time
}

func newBundle(t *testing.T) *bundle {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := &bundle{st: st, now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	b.svc = &Service{Store: st, Now: func() time.Time { return b.now },
		Config: &Config{Expiry: DefaultExpiry, Groups: map[string][]string{"platform": {"alice", "bob", "ops-bot"}}}}
	return b
}

// request stores a pending request raised by ops-bot.
func (b *bundle) request(t *testing.T, id string) {
	t.Helper()
	a := &store.Approval{ID: id, EntryRef: "jsonl:" + id, EntryID: id, Key: id, ApproverGroup: "platform",
		State: store.ApprovalPending, Evidence: "sha256:ev-" + id, RequestedBy: "ops-bot", RequestedAt: b.now,
		ExpiresAt: b.now.Add(DefaultExpiry), Decision: triage.Decision{Class: triage.Governance}}
	if err := b.st.Update(context.Background(), func(tx store.Tx) error { return tx.PutApproval(a) }); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) get(t *testing.T, id string) *store.Approval {
	t.Helper()
	var a *store.Approval
	_ = b.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		a, err = tx.Approval(id)
		return err
	})
	return a
}

func TestAuthorizationMatrix(t *testing.T) {
	cases := []struct {
		who     string
		approve bool
		want    error
		state   string
	}{
		{"alice", true, nil, store.ApprovalApproved},
		{"alice", false, nil, store.ApprovalRejected},
		{"mallory", true, ErrForbidden, store.ApprovalPending},
		{"mallory", false, ErrForbidden, store.ApprovalPending},
		{"ops-bot", true, ErrSelfApproval, store.ApprovalPending}, // a member, but raised it
		{"ops-bot", false, ErrSelfApproval, store.ApprovalPending},
	}
	for _, c := range cases {
		name := c.who + map[bool]string{true: "/approve", false: "/reject"}[c.approve]
		t.Run(name, func(t *testing.T) {
			b := newBundle(t)
			b.request(t, "r1")
			_, err := b.svc.Decide(context.Background(), Decision{ID: "r1", Actor: c.who, Approve: c.approve, Reason: "checked"})
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if got := b.get(t, "r1").State; got != c.state {
				t.Fatalf("state %s, want %s", got, c.state)
			}
		})
	}
}

func TestRejectNeedsReason(t *testing.T) {
	b := newBundle(t)
	b.request(t, "r1")
	if _, err := b.svc.Decide(context.Background(), Decision{ID: "r1", Actor: "alice"}); err == nil {
		t.Fatal("reject without a reason was accepted")
	}
}

func TestDecidedOnce(t *testing.T) {
	b := newBundle(t)
	b.request(t, "r1")
	ctx := context.Background()
	if _, err := b.svc.Decide(ctx, Decision{ID: "r1", Actor: "alice", Approve: true}); err != nil {
		t.Fatal(err)
	}
	_, err := b.svc.Decide(ctx, Decision{ID: "r1", Actor: "bob", Reason: "no", Approve: false})
	if !errors.Is(err, ErrDecided) {
		t.Fatalf("second decision: %v", err)
	}
	if a := b.get(t, "r1"); a.State != store.ApprovalApproved || a.DecidedBy != "alice" {
		t.Fatalf("%+v", a)
	}
}

func TestStaleEvidenceIsRefusedAndRecorded(t *testing.T) {
	b := newBundle(t)
	b.request(t, "r1")
	_, err := b.svc.Decide(context.Background(), Decision{ID: "r1", Actor: "alice", Approve: true, CurrentEvidence: "sha256:changed"})
	if !errors.Is(err, ErrStale) {
		t.Fatalf("got %v", err)
	}
	if a := b.get(t, "r1"); a.State != store.ApprovalStale {
		t.Fatalf("state %s", a.State)
	}
	// The same evidence is fine.
	b.request(t, "r2")
	if _, err := b.svc.Decide(context.Background(), Decision{ID: "r2", Actor: "alice", Approve: true, CurrentEvidence: "sha256:ev-r2"}); err != nil {
		t.Fatal(err)
	}
}

func TestExpiry(t *testing.T) {
	b := newBundle(t)
	b.request(t, "r1")
	b.now = b.now.Add(DefaultExpiry + time.Second)
	list, err := b.svc.List(context.Background(), Filter{State: store.ApprovalExpired})
	if err != nil || len(list) != 1 {
		t.Fatalf("expired list %v %v", list, err)
	}
	if _, err := b.svc.Decide(context.Background(), Decision{ID: "r1", Actor: "alice", Approve: true}); !errors.Is(err, ErrExpired) {
		t.Fatalf("got %v", err)
	}
	if a := b.get(t, "r1"); a.State != store.ApprovalExpired {
		t.Fatalf("state %s", a.State)
	}
}

func TestConcurrentApproveAndRejectEndWithOneDecision(t *testing.T) {
	for i := range 20 {
		b := newBundle(t)
		b.request(t, "r1")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, d := range []Decision{{ID: "r1", Actor: "alice", Approve: true}, {ID: "r1", Actor: "bob", Reason: "no"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[j] = b.svc.Decide(context.Background(), d)
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, ErrDecided):
				t.Fatalf("round %d: %v", i, err)
			}
		}
		a := b.get(t, "r1")
		if ok != 1 || (a.State != store.ApprovalApproved && a.State != store.ApprovalRejected) {
			t.Fatalf("round %d: %d winners, state %s", i, ok, a.State)
		}
		// Exactly one approval record in the audit chain.
		n := 0
		_ = audit.Each(context.Background(), b.st, audit.Query{Kind: audit.KindApproval}, func(audit.Record) error { n++; return nil })
		if n != 1 {
			t.Fatalf("round %d: %d approval records", i, n)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	c, err := LoadConfig(filepath.Join(dir, "missing.yaml"))
	if err != nil || len(c.Groups) != 0 || c.Expiry != DefaultExpiry {
		t.Fatalf("missing file: %+v %v", c, err)
	}
	p := filepath.Join(dir, "approvers.yaml")
	write(t, p, "expiry: 2h\ngroups:\n  platform: [alice, bob]\n")
	c, err = LoadConfig(p)
	if err != nil || c.Expiry != 2*time.Hour || !c.Member("platform", "bob") || c.Member("platform", "eve") {
		t.Fatalf("%+v %v", c, err)
	}
	write(t, p, "groups:\n  platform: [alice]\nmembers: []\n")
	var ce *triage.ConfigError
	if _, err := LoadConfig(p); !errors.As(err, &ce) {
		t.Fatalf("unknown key: %v", err)
	}
}

// A rejection moves the entry out of awaiting_approval in the same
// transaction, with the rejector and reason (issue 17: it stayed
// awaiting_approval for ever).
func TestRejectionMovesTheEntryToRejected(t *testing.T) {
	b := newBundle(t)
	b.request(t, "r1")
	ctx := context.Background()
	er := &store.EntryRecord{Entry: entry.Entry{ID: "r1", Source: "jsonl", IdempotencyKey: "r1"}, Status: store.StatusAwaitingApproval, ApprovalID: "r1"}
	if er.Entry.Ref() != "jsonl:r1" {
		t.Fatalf("ref %s", er.Entry.Ref())
	}
	if err := b.st.Update(ctx, func(tx store.Tx) error { return tx.PutEntry(er) }); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Decide(ctx, Decision{ID: "r1", Actor: "alice", Reason: "refunded"}); err != nil {
		t.Fatal(err)
	}
	var got *store.EntryRecord
	_ = b.st.View(ctx, func(tx store.Tx) error {
		var err error
		got, err = tx.Entry("jsonl:r1")
		return err
	})
	if got == nil || got.Status != store.StatusRejected || got.Hold != store.HoldRejected || got.Reason != "rejected by alice: refunded" {
		t.Fatalf("entry after rejection: %+v", got)
	}
}

// The approvers.yaml shipped at the repository root loads strictly and
// grants nothing until edited; a missing file is named with its path.
func TestShippedApproversExampleAndMissingFile(t *testing.T) {
	c, err := LoadConfig("../../approvers.yaml")
	if err != nil || c.Missing || len(c.Groups) != 0 || c.Expiry != DefaultExpiry {
		t.Fatalf("shipped approvers.yaml: %+v %v", c, err)
	}
	if w := c.where("platform-oncall"); !strings.Contains(w, `group "platform-oncall" is not defined in `) || !strings.HasSuffix(w, "approvers.yaml") {
		t.Fatalf("undefined group: %s", w)
	}
	missing := filepath.Join(t.TempDir(), "approvers.yaml")
	c, err = LoadConfig(missing)
	if err != nil || !c.Missing {
		t.Fatalf("missing file: %+v %v", c, err)
	}
	b := newBundle(t)
	b.svc.Config = c
	b.request(t, "r1")
	_, err = b.svc.Decide(context.Background(), Decision{ID: "r1", Actor: "alice", Approve: true})
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "no approvers file: "+missing+" does not exist") {
		t.Fatalf("approve without approvers.yaml: %v", err)
	}
}

// Issue 29: four-eyes compared names byte for byte across tokens and the
// sign-in proxy, so "OPS-BOT" (the proxy's spelling) approved what
// "ops-bot" (a token) raised; and membership missed "Alice" for "alice".
func TestFourEyesComparesNormalisedIdentities(t *testing.T) {
	for _, who := range []string{"OPS-BOT", " ops-bot", "Ops-Bot\t"} {
		b := newBundle(t)
		b.request(t, "r1")
		if _, err := b.svc.Decide(context.Background(), Decision{ID: "r1", Actor: who, Approve: true}); !errors.Is(err, ErrSelfApproval) {
			t.Fatalf("%q approving ops-bot's request: %v, want ErrSelfApproval", who, err)
		}
	}
	b := newBundle(t)
	b.request(t, "r1")
	if _, err := b.svc.Decide(context.Background(), Decision{ID: "r1", Actor: "Alice", Approve: true}); err != nil {
		t.Fatalf("Alice (alice in approvers.yaml): %v", err)
	}
}

// A request asked again keeps its requester, and whoever asked again may
// not decide it either.
func TestRerequestedApprovalKeepsItsRequester(t *testing.T) {
	b := newBundle(t)
	a := &store.Approval{ID: "r2", EntryRef: "jsonl:r2", EntryID: "r2", Key: "r2", ApproverGroup: "platform",
		State: store.ApprovalPending, RequestedBy: "ops-bot", RerequestedBy: []string{"bob"}, RequestedAt: b.now, ExpiresAt: b.now.Add(DefaultExpiry)}
	if err := b.st.Update(context.Background(), func(tx store.Tx) error { return tx.PutApproval(a) }); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"ops-bot", "Bob"} {
		if _, err := b.svc.Decide(context.Background(), Decision{ID: "r2", Actor: who, Approve: true}); !errors.Is(err, ErrSelfApproval) {
			t.Fatalf("%s deciding a request they raised or asked again: %v", who, err)
		}
	}
	if _, err := b.svc.Decide(context.Background(), Decision{ID: "r2", Actor: "alice", Approve: true}); err != nil {
		t.Fatal(err)
	}
}
