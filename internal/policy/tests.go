package policy

import (
	"context"
	"fmt"
	"sort"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/replayctl/replayctl/internal/triage"
)

// TestResult is the outcome of one Rego test rule.
type TestResult struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Package string `json:"package"`
	Name    string `json:"name"`
	Pass    bool   `json:"pass"`
	Skip    bool   `json:"skip,omitempty"`
	Error   string `json:"error,omitempty"`
}

// RunTests runs every test_ rule in files (policies and their tests
// together) with the same restricted capabilities as evaluation.
func RunTests(ctx context.Context, files []triage.SourceFile) ([]TestResult, error) {
	files, store, err := splitData(files)
	if err != nil {
		return nil, err
	}
	modules := make(map[string]*ast.Module, len(files))
	ce := &triage.ConfigError{}
	for _, f := range files {
		m, err := ast.ParseModuleWithOpts(f.Name, f.Text, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			if pe, ok := configError(err).(*triage.ConfigError); ok {
				ce.Problems = append(ce.Problems, pe.Problems...)
			}
			continue
		}
		modules[f.Name] = m
	}
	if len(ce.Problems) > 0 {
		return nil, ce
	}
	compiler := ast.NewCompiler().WithCapabilities(Capabilities()).WithEnablePrintStatements(true)
	ch, err := tester.NewRunner().SetCompiler(compiler).SetStore(store).SetModules(modules).
		SetDefaultRegoVersion(ast.RegoV1).RunTests(ctx, nil)
	if err != nil {
		return nil, configError(err)
	}
	var out []TestResult
	for r := range ch {
		tr := TestResult{Package: r.Package, Name: r.Name, Pass: r.Pass(), Skip: r.Skip}
		if r.Location != nil {
			tr.File, tr.Line = r.Location.File, r.Location.Row
		}
		if r.Error != nil {
			tr.Error = r.Error.Error()
			tr.Pass = false
		}
		out = append(out, tr)
	}
	if len(out) == 0 && len(files) > 0 {
		return nil, fmt.Errorf("no Rego tests found (rules named test_* in *_test.rego)")
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Line < out[j].Line
	})
	return out, nil
}
