package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/triage"
)

// testBundle is one reconcile set-up: real rules, real OPA, a real bbolt
// file, a real HTTP sink, and an injected clock.
type testBundle struct {
	t      *testing.T
	dir    string
	engine *triage.Engine
	store  *bolt.Bolt
	sink   *sink
	clock  *fakeClock
}

// rulesWithTarget is the bundled rules.yaml with a targets section.
const baseRules = `version: v1
defaults:
  max_replays: 3
  backoff: {strategy: exponential_jitter, initial: 1s, max: 8s, multiplier: 2}
  owner: platform-oncall
  approver_group: platform-oncall
dlq_rules:
  - name: flaky
    match: {topic: "tool.flaky.**"}
    action: auto_replay
    max_replays: 2
`

// prodigyCopy copies the Prodigy sample into the bundle's directory (the
// source's write-back removes item files) and returns a source over it.
func (b *testBundle) prodigyCopy(t *testing.T) source.Source {
	t.Helper()
	root := filepath.Join(b.dir, "prodigy")
	if err := os.CopyFS(root, os.DirFS("../../testdata/prodigy")); err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse("prodigy:" + root)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func newBundle(t *testing.T, rules string) *testBundle {
	t.Helper()
	dir := t.TempDir()
	rp := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rp, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, _, err := policy.LoadEngine(context.Background(), rp, "../../policies", 0)
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	st, err := bolt.Open(filepath.Join(dir, "replayctl.db"), store.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := &testBundle{t: t, dir: dir, engine: eng, store: st, clock: clk, sink: newSink(t)}
	return b
}

// reconciler builds a runner that sends everything to the sink.
func (b *testBundle) reconciler(par int) *Reconciler {
	h := NewHTTPTarget(b.sink.URL+"/replay", b.sink.URL+"/committed", 2*time.Second, nil)
	return &Reconciler{Engine: b.engine, Store: b.store, Clock: b.clock, Actor: "ops-bot", MaxParallel: par,
		Router: NewRulesRouter(b.engine.Rules, &Route{Name: "sink", Dispatcher: h, Prober: h})}
}

// jsonl writes entries in replayctl's JSONL format and returns the source.
func (b *testBundle) jsonl(name string, entries ...map[string]any) source.Source {
	b.t.Helper()
	var sb strings.Builder
	for _, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			b.t.Fatal(err)
		}
		sb.Write(line)
		sb.WriteByte('\n')
	}
	p := filepath.Join(b.dir, name)
	if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
		b.t.Fatal(err)
	}
	src, err := source.Parse("jsonl:" + p)
	if err != nil {
		b.t.Fatal(err)
	}
	return src
}

func (b *testBundle) run(r *Reconciler, srcs ...source.Source) *Report {
	b.t.Helper()
	rep, err := r.Run(context.Background(), srcs)
	if err != nil {
		b.t.Fatal(err)
	}
	return rep
}

func (b *testBundle) entry(ref string) *store.EntryRecord {
	b.t.Helper()
	var er *store.EntryRecord
	if err := b.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		er, err = tx.Entry(ref)
		return err
	}); err != nil {
		b.t.Fatal(err)
	}
	if er == nil {
		b.t.Fatalf("entry %s not stored", ref)
	}
	return er
}

func (b *testBundle) ledger(key string) triage.LedgerView {
	b.t.Helper()
	v, err := b.store.LedgerView(context.Background(), key)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

func transient(id, key string) map[string]any {
	return map[string]any{"id": id, "topic": "tool.email.send", "reason_code": "timeout", "attempts": 3,
		"idempotency_key": key, "payload": map[string]any{"to": id + "@example.com"}}
}

// delivery is one POST the sink received.
type delivery struct {
	Key, EntryID, Attempt string
	Body                  string
	// Lineage is the replayctl-lineage stamp.
	Lineage string
}

// sink is a real HTTP target that records every replay and answers with
// a scripted status per key (default 200).
type sink struct {
	*httptest.Server
	mu        sync.Mutex
	got       []delivery
	status    func(key string, n int) int // n: deliveries of key so far, from 1
	committed map[string]int              // probe answers per key (default 404)
	hang      time.Duration
}

func newSink(t *testing.T) *sink {
	s := &sink{committed: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if r.Method == http.MethodGet {
			s.mu.Lock()
			code := s.committed[r.URL.Query().Get("key")]
			s.mu.Unlock()
			if code == 0 {
				code = http.StatusNotFound
			}
			w.WriteHeader(code)
			return
		}
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got = append(s.got, delivery{Key: key, EntryID: r.Header.Get("X-Replay-Entry-Id"), Attempt: r.Header.Get("X-Replay-Attempt"), Body: string(body),
			Lineage: r.Header.Get("Replayctl-Lineage")})
		n := 0
		for _, d := range s.got {
			if d.Key == key {
				n++
			}
		}
		status, hang := http.StatusOK, s.hang
		if s.status != nil {
			status = s.status(key, n)
		}
		s.mu.Unlock()
		if hang > 0 {
			time.Sleep(hang)
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "status %d", status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sink) deliveries() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.got...)
}

// perKey counts deliveries per idempotency key.
func (s *sink) perKey() map[string]int {
	out := map[string]int{}
	for _, d := range s.deliveries() {
		out[d.Key]++
	}
	return out
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fakeClock advances only when slept on; it records every sleep.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	if d > 0 {
		c.now = c.now.Add(d)
	}
	c.mu.Unlock()
	return ctx.Err()
}

func (c *fakeClock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, d := range c.sleeps {
		if d > 0 {
			out = append(out, d)
		}
	}
	return out
}
