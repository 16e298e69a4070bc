package policy

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/replayctl/replayctl/internal/triage"
)

// DataFile is the name under which the policy directory's data document
// (every data.json/data.yaml and bundle data, merged as OPA merges them)
// travels with the policies: a SourceFile with this base name is data, not
// a module, for New, RunTests and a stored snapshot alike.
const DataFile = "data.json"

// ReadDir loads dir with OPA's own loader, as `opa test dir` and `opa eval
// -d dir` do: *.rego in every subdirectory, JSON and YAML data files merged
// under the path of their directory, and bundles (directories or .tar.gz).
// It returns the policy modules plus, when there is any data, one DataFile
// holding the merged document; and the test modules (*_test.rego). Each list
// is sorted by name. A file the loader cannot use (notes.md, a FIFO) is an
// error naming it, never skipped: a policy that tests pass with and the live
// engine ignores would make decisions laxer than tested.
func ReadDir(dir string) (policies, tests []triage.SourceFile, err error) {
	ce := &triage.ConfigError{}
	filter := func(path string, info fs.FileInfo, depth int) bool {
		if info.IsDir() || depth == 0 {
			return false
		}
		name := info.Name()
		switch {
		case name == ".manifest" || name == ".signatures.json":
			return true // bundle metadata, read by OPA's bundle loader, not data
		case !info.Mode().IsRegular():
			ce.Problems = append(ce.Problems, triage.Problem{File: path, Msg: "not a regular file; remove it from the policy directory"})
			return true
		case strings.HasSuffix(name, ".rego"), strings.HasSuffix(name, ".json"),
			strings.HasSuffix(name, ".yaml"), strings.HasSuffix(name, ".yml"), strings.HasSuffix(name, ".tar.gz"):
			return false
		}
		ce.Problems = append(ce.Problems, triage.Problem{File: path,
			Msg: "not a policy (*.rego), data (*.json, *.yaml) or bundle (*.tar.gz) file; move it out of the policy directory"})
		return true
	}
	res, lerr := loader.NewFileLoader().WithRegoVersion(ast.RegoV1).WithCapabilities(Capabilities()).Filtered([]string{dir}, filter)
	if lerr != nil {
		loaderProblems(ce, dir, lerr)
	}
	if len(ce.Problems) > 0 {
		return nil, nil, ce
	}
	for _, m := range res.Modules {
		// m.Name is the path as read; the map's key has lost a leading "/".
		name := m.Name
		f := triage.SourceFile{Name: name, Text: string(m.Raw)}
		if strings.HasSuffix(name, "_test.rego") {
			tests = append(tests, f)
		} else {
			policies = append(policies, f)
		}
	}
	sort.Slice(policies, func(i, j int) bool { return policies[i].Name < policies[j].Name })
	sort.Slice(tests, func(i, j int) bool { return tests[i].Name < tests[j].Name })
	if len(policies) == 0 {
		return nil, nil, &triage.ConfigError{Problems: []triage.Problem{{File: dir,
			Msg: "no policy files (*.rego) found; point --policies at the bundled policies/ directory"}}}
	}
	if len(res.Documents) > 0 {
		data, err := json.Marshal(res.Documents) // map keys sorted: a stable text
		if err != nil {
			return nil, nil, fmt.Errorf("policy data in %s: %w", dir, err)
		}
		policies = append(policies, triage.SourceFile{Name: filepath.Join(dir, DataFile), Text: string(data)})
	}
	return policies, tests, nil
}

// loaderProblems turns the loader's errors into problems; ast errors keep
// their file:line, others (bad JSON, a broken bundle) name the directory
// and carry the loader's message, which names the file.
func loaderProblems(ce *triage.ConfigError, dir string, err error) {
	var errs loader.Errors
	if e, ok := err.(loader.Errors); ok {
		errs = e
	} else {
		errs = loader.Errors{err}
	}
	for _, e := range errs {
		if c, ok := configError(e).(*triage.ConfigError); ok {
			for _, p := range c.Problems {
				if p.File == "policies" {
					p.File = dir
				}
				ce.Problems = append(ce.Problems, p)
			}
		}
	}
}

// splitData separates the data document from the modules.
func splitData(files []triage.SourceFile) (modules []triage.SourceFile, store storage.Store, err error) {
	data := map[string]any{}
	for _, f := range files {
		if filepath.Base(f.Name) != DataFile {
			modules = append(modules, f)
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(f.Text), &doc); err != nil {
			return nil, nil, &triage.ConfigError{Problems: []triage.Problem{{File: f.Name, Msg: "policy data must be a JSON object: " + err.Error()}}}
		}
		for k, v := range doc {
			data[k] = v
		}
	}
	return modules, inmem.NewFromObject(data), nil
}
