package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/replayctl/replayctl/internal/triage"
)

// The evaluation memo (issue 16). A decision of a policy is a function of
// the parts of the input it reads and nothing else, as long as it reads
// them through ground paths and calls no builtin that answers differently
// each time (the denied builtins are refused at compile time already; the
// check here does not rely on that). Most DLQ entries share those parts
// (class, proposed action, topic, a risk label), so a run evaluates the
// policy once per distinct projection instead of once per entry.
//
// The memo is off, and every evaluation runs the policy, when a module:
//   - uses input whole, or reads it through a path that is not ground
//     (input[x], input.entry.labels[k]): the read set is then unknown;
//   - reads what identifies an entry (input.entry, its id or idempotency
//     key): every entry would be its own key, all cost and no hit;
//   - calls walk or a non-deterministic builtin (time.now_ns, rand.*,
//     http.send, uuid.*, net.*, opa.runtime, or any OPA marks so).

// MemoSize bounds the memo: past it the least recently used projection is
// dropped, so memory stays flat whatever the number of entries.
const MemoSize = 4096

// memo caches policy results by projected input.
type memo struct {
	paths  []ast.Ref // input paths the policy reads, relative to input
	prefix string    // the policy text's hash: the key's snapshot part
	cache  *lru.Cache[string, triage.PolicyResult]
}

// newMemo analyses the policy's modules and returns its memo, or nil with
// the reason it is off. files are the policy's files as New takes them
// (modules and data): all of them make the key's snapshot part.
func newMemo(files []triage.SourceFile, size int) (*memo, string) {
	texts := make(map[string]string, len(files))
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f.Name + "\x00" + f.Text + "\x00"))
		if filepath.Base(f.Name) != DataFile {
			texts[f.Name] = f.Text
		}
	}
	compiler, err := ast.CompileModulesWithOpt(texts, ast.CompileOpts{ParserOptions: ast.ParserOptions{RegoVersion: ast.RegoV1}})
	if err != nil {
		return nil, "modules do not compile for analysis: " + err.Error()
	}
	mods := make([]*ast.Module, 0, len(compiler.Modules))
	for _, m := range compiler.Modules {
		mods = append(mods, m)
	}
	paths, why := readSet(mods)
	if why != "" {
		return nil, why
	}
	cache, err := lru.New[string, triage.PolicyResult](max(size, 1))
	if err != nil {
		return nil, err.Error()
	}
	return &memo{paths: paths, prefix: hex.EncodeToString(h.Sum(nil)), cache: cache}, ""
}

// identifying are the input paths that differ for every entry.
var identifying = []ast.Ref{
	ast.MustParseRef("input.entry.id"),
	ast.MustParseRef("input.entry.idempotency_key"),
}

// readSet returns the input paths the compiled modules read (relative to
// input, sorted, none under another), or why the memo must stay off.
func readSet(mods []*ast.Module) ([]ast.Ref, string) {
	var (
		found []ast.Ref
		why   string
	)
	for _, m := range mods {
		ast.WalkRefs(m, func(ref ast.Ref) bool {
			if why != "" {
				return true
			}
			if len(ref) == 0 {
				return false
			}
			if name := ref.String(); nondeterministic(name) {
				why = "the policy calls " + name + ", which answers differently each time"
				return true
			}
			if !ref.HasPrefix(ast.InputRootRef) {
				return false
			}
			if len(ref) == 1 {
				why = "the policy uses input whole"
				return true
			}
			for _, t := range ref[1:] {
				if !t.IsGround() {
					why = "the policy reads input through a path that is not ground: " + ref.String()
					return true
				}
			}
			for _, id := range identifying {
				if id.HasPrefix(ref) || ref.HasPrefix(id) {
					why = "the policy reads " + ref.String() + ", which differs for every entry"
					return true
				}
			}
			found = append(found, ref.Copy())
			return false
		})
		if why != "" {
			return nil, why
		}
	}
	slices.SortFunc(found, func(a, b ast.Ref) int { return a.Compare(b) })
	var paths []ast.Ref
	for _, r := range found {
		if n := len(paths); n > 0 && r.HasPrefix(paths[n-1]) {
			continue // already read whole through a shorter path
		}
		paths = append(paths, r)
	}
	rel := make([]ast.Ref, len(paths))
	for i, p := range paths {
		rel[i] = p[1:]
	}
	return rel, ""
}

// nondeterministic reports whether a ref names walk or a builtin whose
// answer is not a function of its arguments. net.* is left to OPA's own
// Nondeterministic flag: net.lookup_ip_addr asks DNS, but the net.cidr_*
// builtins are pure functions of their arguments and keep the memo.
func nondeterministic(name string) bool {
	switch name {
	case "walk", "time.now_ns", "http.send", "opa.runtime":
		return true
	}
	for _, p := range []string{"rand.", "uuid."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	b, ok := ast.BuiltinMap[name]
	return ok && b.Nondeterministic
}

// key is the memo key of an input: the policy's hash and, for each path
// read, whether the input has it and its value (canonical: OPA writes
// object keys sorted). The paths policies usually read are taken from in
// directly (leaf); any other builds the whole input value once, which is
// returned for the evaluation (nil when it was not built).
func (m *memo) key(in *triage.PolicyInput) (string, ast.Value) {
	var (
		b    strings.Builder
		full ast.Value
	)
	b.WriteString(m.prefix)
	for _, p := range m.paths {
		v, found, ok := leaf(in, p)
		if !ok {
			if full == nil {
				full = inputValue(in)
			}
			var err error
			v, err = full.Find(p)
			found = err == nil
		}
		if !found {
			b.WriteString("\x00-")
			continue
		}
		b.WriteString("\x00+")
		b.WriteString(v.String())
	}
	return b.String(), full
}

// leaf returns the value of in at path (relative to input) for the paths
// a policy usually reads, without building the whole input: found says
// whether the input has it; ok false means path is not one of those (the
// caller looks it up in the whole input). It must agree with inputValue
// (TestMemoLeafAgreesWithTheWholeInput).
func leaf(in *triage.PolicyInput, path ast.Ref) (v ast.Value, found, ok bool) {
	name := func(i int) string {
		s, _ := path[i].Value.(ast.String)
		return string(s)
	}
	for _, t := range path {
		if _, isStr := t.Value.(ast.String); !isStr {
			return nil, false, false
		}
	}
	e := in.Entry
	switch {
	case len(path) == 1:
		switch name(0) {
		case "class":
			return ast.String(in.Class), true, true
		case "unrecognised":
			return ast.Boolean(in.Unrecognised), true, true
		case "rule":
			return ast.String(in.Rule), true, true
		case "rule_matched":
			return ast.Boolean(in.RuleMatched), true, true
		case "proposed_action":
			return ast.String(in.ProposedAction), true, true
		case "owner":
			return ast.String(in.Owner), true, true
		case "approver_group":
			return ast.String(in.ApproverGroup), true, true
		case "max_replays":
			return ast.IntNumberTerm(in.MaxReplays).Value, true, true
		}
	case len(path) == 2 && name(0) == "entry":
		switch name(1) {
		case "source":
			return ast.String(e.Source), true, true
		case "topic":
			return ast.String(e.Topic), true, true
		case "reason_code":
			return ast.String(e.ReasonCode), true, true
		case "message":
			return ast.String(e.Message), true, true
		case "attempts":
			return ast.IntNumberTerm(e.Attempts).Value, true, true
		}
	case len(path) == 2 && name(0) == "ledger":
		switch name(1) {
		case "state":
			return ast.String(in.Ledger.State), true, true
		case "replays":
			return ast.IntNumberTerm(in.Ledger.Replays).Value, true, true
		case "approved":
			return ast.Boolean(in.Ledger.Approved), true, true
		case "probe":
			return ast.String(in.Ledger.Probe), true, true
		}
	case len(path) == 3 && name(0) == "entry" && name(1) == "labels":
		l, has := e.Labels[name(2)]
		return ast.String(l), has, true
	}
	return nil, false, false
}

func (m *memo) get(key string) (triage.PolicyResult, bool) {
	res, ok := m.cache.Get(key)
	if ok {
		res.Reasons = slices.Clone(res.Reasons) // the caller's to change
	}
	return res, ok
}

func (m *memo) add(key string, res triage.PolicyResult) {
	res.Reasons = slices.Clone(res.Reasons)
	m.cache.Add(key, res)
}
