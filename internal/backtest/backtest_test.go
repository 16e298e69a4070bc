package backtest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	_ "github.com/replayctl/replayctl/internal/policy" // merges every connector's reason codes into the taxonomy
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
	"github.com/replayctl/replayctl/internal/triage"
)

const baselineRules = `version: v1
dlq_rules:
  - name: transient
    match: {class: transient}
    action: auto_replay
`

// stricter: payments need a person; looser: governance failures of the
// ops topics are replayed unattended.
const stricterRules = baselineRules + `  - name: never
    match: {class: poison}
    action: quarantine
targets:
  - name: pay
    match: {topic: "pay.**"}
    key_lifetime: 1h
    http: {url: "http://pay.example/"}
`

const looserRules = `version: v1
dlq_rules:
  - name: ops-governance
    match: {class: governance, topic: "ops.**"}
    action: auto_replay
  - name: transient
    match: {class: transient}
    action: auto_replay
`

var t0 = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

func engine(t *testing.T, rules, snap string) *triage.Engine {
	t.Helper()
	r, err := triage.ParseRules("rules.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	return &triage.Engine{Rules: r, Snapshot: snap}
}

// history is n entries of mixed classes and topics, failing over 40 days.
func history(n int) []entry.Entry {
	codes := []string{"timeout", "upstream_503", "policy_denied", "schema_validation_failed", "what_is_this"}
	topics := []string{"pay.charge", "ops.deploy", "mail.send"}
	out := make([]entry.Entry, n)
	for i := range out {
		out[i] = entry.Entry{ID: fmt.Sprintf("e%04d", i), Source: "jsonl", Topic: topics[i%len(topics)],
			ReasonCode: codes[i%len(codes)], Message: fmt.Sprintf("failed at step %d", i%7), Attempts: 1 + i%4,
			FirstFailure: t0.Add(time.Duration(i) * 2 * time.Hour)}
		out[i].EnsureKey()
	}
	return out
}

// record decides each entry with the baseline at its failure time plus
// 3h and records it as `reconcile` does, with a dispatch record between
// decisions that the backtest must pass over.
func record(t *testing.T, st store.Backend, base *triage.Engine, es []entry.Entry) {
	t.Helper()
	err := st.Update(context.Background(), func(tx store.Tx) error {
		for i := range es {
			e := es[i]
			at := e.FirstFailure.Add(3 * time.Hour)
			d := base.Decide(context.Background(), &e, triage.LedgerView{At: at})
			in := e
			in.Payload = nil
			if _, err := tx.Append(&audit.Record{Time: at, Actor: "test", Kind: audit.KindDecision, EntryRef: e.Ref(),
				Decision: &d, Input: &in, Action: d.Action, PolicySnapshot: d.PolicySnapshot}); err != nil {
				return err
			}
			if _, err := tx.Append(&audit.Record{Time: at, Actor: "test", Kind: audit.KindDispatch, EntryRef: e.Ref()}); err != nil {
				return err
			}
		}
		// A decision without inputs (an old record) is counted, not re-decided.
		_, err := tx.Append(&audit.Record{Time: t0.Add(2000 * time.Hour), Kind: audit.KindDecision, EntryRef: "jsonl:old"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// direct is the expected report's counts, computed without the backtest:
// each entry decided by the candidate and by the baseline, in a loop.
func direct(base, cand *triage.Engine, es []entry.Entry, since time.Time) (decisions, changed, nowAuto int, trans map[[2]triage.Action]int) {
	trans = map[[2]triage.Action]int{}
	for i := range es {
		at := es[i].FirstFailure.Add(3 * time.Hour)
		if at.Before(since) {
			continue
		}
		decisions++
		a := base.Decide(context.Background(), &es[i], triage.LedgerView{At: at}).Action
		b := cand.Decide(context.Background(), &es[i], triage.LedgerView{At: at}).Action
		if a != b {
			changed++
			trans[[2]triage.Action{a, b}]++
			if b == triage.AutoReplay {
				nowAuto++
			}
		}
	}
	return
}

func TestDecisionsAgainstDirectComputation(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	base := engine(t, baselineRules, "sha256:base")
	es := history(480)
	record(t, st, base, es)
	since := t0.Add(10 * 24 * time.Hour)

	for _, c := range []struct {
		name    string
		rules   string
		changes bool
		looser  bool
	}{
		{"same rules", baselineRules, false, false},
		{"stricter", stricterRules, true, false},
		{"looser", looserRules, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cand := engine(t, c.rules, "sha256:cand")
			var first *Report
			// The store hands out raw records, decoded on the workers.
			for _, workers := range []int{1, 3, 8} {
				rep, err := Decisions(context.Background(), st, Options{Engine: cand, Since: since, Workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				if first == nil {
					first = rep
				} else if !reflect.DeepEqual(first, rep) {
					t.Fatalf("%d workers give another report:\n%+v\n%+v", workers, rep, first)
				}
			}
			rep := first
			decisions, changed, nowAuto, trans := direct(base, cand, es, since)
			if rep.Decisions != decisions || rep.Changed != changed || rep.NowAutoReplay != nowAuto {
				t.Fatalf("decisions %d changed %d now-auto %d, want %d %d %d", rep.Decisions, rep.Changed, rep.NowAutoReplay, decisions, changed, nowAuto)
			}
			if (changed > 0) != c.changes || (nowAuto > 0) != c.looser {
				t.Fatalf("the case does not test what it says: changed %d, now auto %d", changed, nowAuto)
			}
			if rep.NoInputs != 1 {
				t.Errorf("no-inputs %d, want 1", rep.NoInputs)
			}
			got := map[[2]triage.Action]int{}
			for _, tr := range rep.Transitions {
				got[[2]triage.Action{tr.From, tr.To}] = tr.Count
			}
			if !reflect.DeepEqual(got, trans) {
				t.Errorf("transitions %v, want %v", got, trans)
			}
			sum := 0
			for _, g := range rep.Groups {
				sum += g.Count
				if len(g.Samples) == 0 || len(g.Samples) > 3 || len(g.Samples) > g.Count {
					t.Errorf("group %+v: %d samples", g, len(g.Samples))
				}
				for _, s := range g.Samples {
					if s.From != g.From || s.To != g.To || s.Rule != g.Rule || s.Decision == 0 {
						t.Errorf("sample %+v does not belong to group %s/%s", s, g.Rule, g.Signature)
					}
				}
			}
			if sum != changed {
				t.Errorf("groups hold %d changes, want %d", sum, changed)
			}
			if want := min(nowAuto, 20); len(rep.AutoReplays) != want {
				t.Errorf("%d highlighted, want %d", len(rep.AutoReplays), want)
			}
		})
	}
}

func TestEntriesComparesBaselineAndCandidate(t *testing.T) {
	es := history(200)
	at := t0.Add(30 * 24 * time.Hour)
	base, cand := engine(t, baselineRules, "b"), engine(t, stricterRules, "c")
	stream := func(context.Context) iter.Seq2[entry.Entry, error] {
		return func(yield func(entry.Entry, error) bool) {
			for _, e := range es {
				if !yield(e, nil) {
					return
				}
			}
		}
	}
	rep, err := Entries(context.Background(), stream, nil, base, at, Options{Engine: cand, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for i := range es {
		v := triage.LedgerView{At: at}
		if base.Decide(context.Background(), &es[i], v).Action != cand.Decide(context.Background(), &es[i], v).Action {
			changed++
		}
	}
	if rep.Decisions != len(es) || rep.Changed != changed || changed == 0 {
		t.Fatalf("decisions %d changed %d, want %d %d", rep.Decisions, rep.Changed, len(es), changed)
	}
	// A stream error ends the backtest with it.
	bad := func(context.Context) iter.Seq2[entry.Entry, error] {
		return func(yield func(entry.Entry, error) bool) { yield(entry.Entry{}, fmt.Errorf("source down")) }
	}
	if _, err := Entries(context.Background(), bad, nil, base, at, Options{Engine: cand}); err == nil || err.Error() != "source down" {
		t.Fatalf("stream error: %v", err)
	}
}

// TestBacktestWritesNothing: the store file is byte for byte the same
// after a backtest over it (bbolt's dry-run test habit).
func TestBacktestWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := bolt.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	record(t, st, engine(t, baselineRules, "b"), history(50))
	st.Close()
	before := fileSum(t, path)
	ro, err := bolt.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decisions(context.Background(), ro, Options{Engine: engine(t, looserRules, "c")}); err != nil {
		t.Fatal(err)
	}
	ro.Close()
	if fileSum(t, path) != before {
		t.Fatal("the backtest changed the store file")
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	testsvc.Stop()
	os.Exit(code)
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// TestDecisionsOnPostgres: the same history in PostgreSQL, read through
// AuditRange (no raw records), gives the counts of the direct computation.
func TestDecisionsOnPostgres(t *testing.T) {
	p, err := postgres.Open(context.Background(), testsvc.Postgres(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	base, cand := engine(t, baselineRules, "sha256:base"), engine(t, stricterRules, "sha256:cand")
	es := history(120)
	record(t, p, base, es)
	// Records are chained by the sealer; a backtest reads the sealed chain.
	for {
		n, err := p.SealAudit(context.Background(), true)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	rep, err := Decisions(context.Background(), p, Options{Engine: cand, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	decisions, changed, nowAuto, _ := direct(base, cand, es, time.Time{})
	if rep.Decisions != decisions || rep.Changed != changed || rep.NowAutoReplay != nowAuto || changed == 0 {
		t.Fatalf("decisions %d changed %d now-auto %d, want %d %d %d", rep.Decisions, rep.Changed, rep.NowAutoReplay, decisions, changed, nowAuto)
	}
}

// TestUnreadableRecordsAreCounted: a stored record that does not decode is
// counted in the report, through either read path, not silently dropped.
func TestUnreadableRecordsAreCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := bolt.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	record(t, st, engine(t, baselineRules, "b"), history(10))
	st.Close()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		k := make([]byte, 8)
		binary.BigEndian.PutUint64(k, 9999)
		return tx.Bucket([]byte("audit")).Put(k, []byte("not a record"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	ro, err := bolt.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, r := range []Chain{ro} {
		rep, err := Decisions(context.Background(), r, Options{Engine: engine(t, looserRules, "c")})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Unreadable != 1 || rep.Decisions != 10 {
			t.Fatalf("%T: unreadable %d decisions %d, want 1 and 10", r, rep.Unreadable, rep.Decisions)
		}
	}
}
