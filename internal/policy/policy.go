package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/replayctl/replayctl/internal/triage"
)

// Query is the document every policy must define: an object
// {"action": <action>, "reasons": [<string>...]}.
const Query = "data.replayctl.decision"

// DefaultTimeout bounds one evaluation; past it the decision fails closed.
const DefaultTimeout = time.Second

// deniedBuiltins reach outside the process, read its environment, or
// answer differently each time: a replay decision must depend on its
// inputs only, so that a recorded decision can be re-run exactly.
var deniedBuiltins = []string{"http.send", "net.lookup_ip_addr", "opa.runtime",
	"time.now_ns", "rand.intn", "uuid.rfc4122"}

// Capabilities returns this OPA version's capabilities without the denied
// builtins.
func Capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool {
		return slices.Contains(deniedBuiltins, b.Name)
	})
	return caps
}

// Engine holds the prepared query. It is safe for concurrent use.
type Engine struct {
	query   rego.PreparedEvalQuery
	timeout time.Duration
	memo    *memo // nil: every evaluation runs the policy (memoOff says why)
	memoOff string
}

// New compiles the policy files once. Compile errors come back as a
// *triage.ConfigError with file:line for each.
func New(ctx context.Context, files []triage.SourceFile, timeout time.Duration) (*Engine, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	opts := []func(*rego.Rego){
		rego.Query(Query),
		rego.Capabilities(Capabilities()),
		rego.StrictBuiltinErrors(true),
		rego.SetRegoVersion(ast.RegoV1),
	}
	modules, store, err := splitData(files)
	if err != nil {
		return nil, err
	}
	opts = append(opts, rego.Store(store))
	for _, f := range modules {
		opts = append(opts, rego.Module(f.Name, f.Text))
	}
	pq, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, configError(err)
	}
	m, off := newMemo(files, MemoSize)
	return &Engine{query: pq, timeout: timeout, memo: m, memoOff: off}, nil
}

// Memoised reports whether evaluations are memoised by the input paths
// the policy reads (memo.go), and if not, why.
func (e *Engine) Memoised() (bool, string) { return e.memo != nil, e.memoOff }

// configError turns OPA's errors (rego.Errors of *ast.Error, or
// ast.Errors) into problems with file:line.
func configError(err error) error {
	ce := &triage.ConfigError{}
	var add func(error)
	add = func(e error) {
		var (
			re  rego.Errors
			ae  ast.Errors
			one *ast.Error
		)
		switch {
		case errors.As(e, &re):
			for _, x := range re {
				add(x)
			}
		case errors.As(e, &ae):
			for _, x := range ae {
				add(x)
			}
		case errors.As(e, &one):
			p := triage.Problem{File: "policies", Msg: one.Message}
			if one.Location != nil {
				p.File, p.Line = one.Location.File, one.Location.Row
			}
			ce.Problems = append(ce.Problems, p)
		default:
			ce.Problems = append(ce.Problems, triage.Problem{File: "policies", Msg: e.Error()})
		}
	}
	add(err)
	return ce
}

// ErrUndefined is returned when the policy does not define a decision for
// the input: the caller fails closed.
var ErrUndefined = errors.New("policy result undefined: " + Query + " must be defined for every input")

// Evaluate runs the prepared query on one proposal.
func (e *Engine) Evaluate(ctx context.Context, in *triage.PolicyInput) (triage.PolicyResult, error) {
	var (
		key string
		v   ast.Value
	)
	if e.memo != nil {
		key, v = e.memo.key(in)
		if res, ok := e.memo.get(key); ok {
			return res, nil
		}
	}
	if v == nil {
		v = inputValue(in)
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	rs, err := e.query.Eval(ctx, rego.EvalParsedInput(v))
	if err != nil {
		return triage.PolicyResult{}, fmt.Errorf("evaluate policy: %w", err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return triage.PolicyResult{}, ErrUndefined
	}
	res, err := parseResult(rs[0].Expressions[0].Value)
	if err == nil && e.memo != nil {
		// Only answers are kept: an error (a timeout, a bad result) is
		// met again, and fails closed, on every evaluation.
		e.memo.add(key, res)
	}
	return res, err
}

func parseResult(v any) (triage.PolicyResult, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return triage.PolicyResult{}, fmt.Errorf("policy returned %T, want an object {action, reasons}", v)
	}
	s, ok := obj["action"].(string)
	if !ok {
		return triage.PolicyResult{}, fmt.Errorf("policy decision has no string action")
	}
	a, err := triage.ParseAction(s)
	if err != nil {
		return triage.PolicyResult{}, fmt.Errorf("policy decision: %w", err)
	}
	res := triage.PolicyResult{Action: a}
	switch rs := obj["reasons"].(type) {
	case nil:
	case []any:
		for _, r := range rs {
			str, ok := r.(string)
			if !ok {
				return triage.PolicyResult{}, fmt.Errorf("policy reasons must be strings, got %T", r)
			}
			res.Reasons = append(res.Reasons, str)
		}
		sort.Strings(res.Reasons) // sets come back unordered; decisions must be stable
	default:
		return triage.PolicyResult{}, fmt.Errorf("policy reasons must be a list, got %T", rs)
	}
	return res, nil
}
