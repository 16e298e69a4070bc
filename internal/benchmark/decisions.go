package benchmark

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/policy"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/triage"
)

// decisions compares `plan` (the command, in its own process, every core)
// with the irreducible work on the same file: bare encoding/json decoding
// of each line and a bare prepared OPA evaluation of the same policy with
// the same input, on every core. Runs alternate, medians are compared.
func decisions(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(100_000, 2_000)
	c.progress(fmt.Sprintf("decision throughput: plan vs bare decode + prepared eval, %d entries, all cores", n))
	spec, err := c.corpus("plan.jsonl", gen.Options{N: n, Seed: 1})
	if err != nil {
		return nil, err
	}
	bare, err := c.bareEvalOf(ctx, spec)
	if err != nil {
		return nil, err
	}
	path := strings.TrimPrefix(spec, "jsonl:")
	var peaks []float64
	ours := func() (time.Duration, error) {
		if c.Self == "" {
			return c.planInProcess(ctx, spec)
		}
		took, mb, err := c.child(ctx, "plan", "--source", spec, "--rules", c.Rules, "--policies", c.Policies,
			"--db", filepath.Join(c.Dir, "none.db"), "-o", "json")
		peaks = append(peaks, mb)
		return took, err
	}
	base, plan, err := paired(c.size(3, 1), func() (time.Duration, error) { return bare.run(ctx, path) }, ours)
	if err != nil {
		return nil, err
	}
	how := "plan, its own process"
	if c.Self == "" {
		how = "plan's pipeline in process"
	}
	rows := []Row{{Measure: fmt.Sprintf("decision throughput, %s, %d entries, all cores (entries/s)", how, n),
		Figure: rate(n, plan), Unit: "/s", Baseline: rate(n, base), Ratio: base.Seconds() / plan.Seconds(),
		Note: "of bare decode + prepared eval", Target: ">= 0.8x"}}
	if len(peaks) > 0 {
		rows = append(rows, Row{Measure: fmt.Sprintf("peak RSS, plan %d jsonl entries", n), Figure: median(peaks), Unit: "MB",
			Note: "the plan process's own VmHWM", Target: "flat (see the 1M row)"})
	}
	return rows, nil
}

// planInProcess runs plan's pipeline (sources, every core, JSON out) in
// this process: the smoke test has no binary to start.
func (c *Config) planInProcess(ctx context.Context, spec string) (time.Duration, error) {
	src, err := source.Parse(spec)
	if err != nil {
		return 0, err
	}
	eng, err := c.engine(ctx)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	planner := &replay.Planner{Engine: eng}
	err = planner.Plan(ctx, []source.Source{src}, func(_ *entry.Entry, d *triage.Decision) error {
		_, err := json.Marshal(d)
		return err
	})
	return time.Since(t0), err
}

// bareEval is the baseline: the policy prepared with OPA's own API, no
// replayctl code on the path.
type bareEval struct {
	query rego.PreparedEvalQuery
	// proposals holds, by line number (from 1), what plan asks the policy
	// about that line; a line plan does not ask about (undecodable, handled
	// at the source) has none. The policy's cost depends on its input, so
	// the baseline evaluates exactly plan's inputs.
	proposals map[int]*proposal
}

// proposal is the part of a policy input the rules stage works out.
type proposal struct {
	class, rule, action, owner, group string
	unrecognised, matched             bool
	maxReplays                        int
}

// proposals runs the rules stage over the corpus once, before anything is
// timed, and records each policy input by line.
func (c *Config) proposals(ctx context.Context, spec string) (map[int]*proposal, error) {
	eng, err := c.engine(ctx)
	if err != nil {
		return nil, err
	}
	src, err := source.Parse(spec)
	if err != nil {
		return nil, err
	}
	rec := &recorder{by: map[string]*proposal{}}
	g := &triage.Engine{Rules: eng.Rules, Policy: rec, Snapshot: eng.Snapshot}
	out := map[int]*proposal{}
	for e, err := range src.Entries(ctx) {
		if err != nil {
			return nil, err
		}
		g.Decide(ctx, &e, triage.LedgerView{})
		if p := rec.by[e.ID]; p != nil {
			_, line, _ := strings.Cut(e.Origin[len(strings.TrimPrefix(spec, "jsonl:")):], ":")
			var n int
			if _, err := fmt.Sscan(line, &n); err != nil {
				return nil, fmt.Errorf("origin %q: %w", e.Origin, err)
			}
			out[n] = p
			delete(rec.by, e.ID)
		}
	}
	return out, nil
}

// recorder is a triage.Policy that keeps what it is asked.
type recorder struct{ by map[string]*proposal }

func (r *recorder) Evaluate(_ context.Context, in *triage.PolicyInput) (triage.PolicyResult, error) {
	r.by[in.Entry.ID] = &proposal{class: string(in.Class), rule: in.Rule, action: string(in.ProposedAction),
		owner: in.Owner, group: in.ApproverGroup, unrecognised: in.Unrecognised, matched: in.RuleMatched, maxReplays: in.MaxReplays}
	return triage.PolicyResult{Action: in.ProposedAction}, nil
}

// bareEvalOf prepares the bare baseline for the corpus at spec: the
// policy prepared with OPA's API, and plan's policy input for each line.
func (c *Config) bareEvalOf(ctx context.Context, spec string) (*bareEval, error) {
	bare, err := newBareEval(ctx, c.Policies)
	if err != nil {
		return nil, err
	}
	if bare.proposals, err = c.proposals(ctx, spec); err != nil {
		return nil, err
	}
	return bare, nil
}

func newBareEval(ctx context.Context, dir string) (*bareEval, error) {
	files, _, err := policy.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	opts := []func(*rego.Rego){rego.Query(policy.Query), rego.SetRegoVersion(ast.RegoV1)}
	for _, f := range files {
		if filepath.Base(f.Name) == policy.DataFile {
			var data map[string]any
			if err := json.Unmarshal([]byte(f.Text), &data); err != nil {
				return nil, err
			}
			opts = append(opts, rego.Store(inmem.NewFromObject(data)))
			continue
		}
		opts = append(opts, rego.Module(f.Name, f.Text))
	}
	q, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, err
	}
	return &bareEval{query: q}, nil
}

// bareRecord is a replayctl JSONL line, decoded with nothing but
// encoding/json.
type bareRecord struct {
	ID             string            `json:"id"`
	Topic          string            `json:"topic"`
	ReasonCode     string            `json:"reason_code"`
	Message        string            `json:"message"`
	Attempts       int               `json:"attempts"`
	IdempotencyKey string            `json:"idempotency_key"`
	Labels         map[string]string `json:"labels"`
	Payload        json.RawMessage   `json:"payload"`
	FirstFailure   string            `json:"first_failure"`
	LastFailure    string            `json:"last_failure"`
	SourceState    string            `json:"source_state"`
}

// run decodes and evaluates every line of path on GOMAXPROCS goroutines:
// one reads lines, every one decodes and evaluates. A line that does not
// decode is skipped (plan quarantines it without asking the policy).
func (b *bareEval) run(ctx context.Context, path string) (time.Duration, error) {
	t0 := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	workers := runtime.GOMAXPROCS(0)
	type line struct {
		n    int
		data []byte
	}
	lines := make(chan []line, 2*workers)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range lines {
				for _, l := range batch {
					var r bareRecord
					if json.Unmarshal(l.data, &r) != nil {
						continue
					}
					p := b.proposals[l.n]
					if p == nil {
						continue // plan does not ask the policy either
					}
					if err := b.eval(ctx, &r, p); err != nil && errs[w] == nil {
						errs[w] = err
					}
				}
			}
		}()
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	batch := make([]line, 0, 64)
	for n := 1; sc.Scan(); n++ {
		batch = append(batch, line{n, append([]byte(nil), sc.Bytes()...)})
		if len(batch) == cap(batch) {
			lines <- batch
			batch = make([]line, 0, 64)
		}
	}
	lines <- batch
	close(lines)
	wg.Wait()
	if err := errors.Join(append(errs, sc.Err())...); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// eval evaluates the prepared policy on the line's input; an undefined
// decision is an error, as the policy's fail-closed wrapper makes it.
func (b *bareEval) eval(ctx context.Context, r *bareRecord, p *proposal) error {
	rs, err := b.query.Eval(ctx, rego.EvalParsedInput(bareInput(r, p)))
	if err == nil && (len(rs) == 0 || len(rs[0].Expressions) == 0) {
		err = errors.New("bare eval: undefined decision")
	}
	return err
}

// bareInput is the policy input of replayctl's policy (policy/input.go's
// shape) built straight from the decoded line and the recorded proposal,
// as an AST value.
func bareInput(r *bareRecord, p *proposal) ast.Value {
	s, b, i := ast.StringTerm, ast.BooleanTerm, ast.IntNumberTerm
	kv := func(k string, v *ast.Term) [2]*ast.Term { return ast.Item(s(k), v) }
	labels := ast.NewObject()
	for k, v := range r.Labels {
		labels.Insert(s(k), s(v))
	}
	handled := strings.EqualFold(r.SourceState, "replayed") || strings.EqualFold(r.SourceState, "resolved")
	return ast.NewObject(
		kv("entry", ast.NewTerm(ast.NewObject(
			kv("id", s(r.ID)), kv("source", s("jsonl")), kv("topic", s(r.Topic)), kv("reason_code", s(r.ReasonCode)),
			kv("message", s(r.Message)), kv("attempts", i(r.Attempts)), kv("idempotency_key", s(r.IdempotencyKey)),
			kv("labels", ast.NewTerm(labels)),
			kv("source_state", ast.NewTerm(ast.NewObject(kv("status", s(r.SourceState)), kv("handled", b(handled)),
				kv("manual_review_required", b(false)), kv("reprocess_eligible", b(true)), kv("policy_snapshot", s(""))))),
		))),
		kv("class", s(p.class)), kv("unrecognised", b(p.unrecognised)), kv("rule", s(p.rule)),
		kv("rule_matched", b(p.matched)), kv("proposed_action", s(p.action)), kv("owner", s(p.owner)),
		kv("approver_group", s(p.group)), kv("max_replays", i(p.maxReplays)),
		kv("ledger", ast.NewTerm(ast.NewObject(kv("state", s("")), kv("replays", i(0)), kv("approved", b(false)), kv("probe", s(""))))),
	)
}
