// Package replayctl holds the bundled defaults, rules.yaml and policies/,
// built into the binary with go:embed: a replayctl installed with `go
// install` or copied into an image decides the same way with no file beside
// it. The files stay at the top of the repository, where users read and
// copy them; the commands use them only when no --rules or --policies is
// given and no rules.yaml or policies/ is in the working directory.
package replayctl

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed rules.yaml policies/*.rego
var defaults embed.FS

// File is one bundled file: its name (rules.yaml, or a policy's path inside
// policies/, as a snapshot names it) and its text.
type File struct {
	Name string
	Text string
}

// Rules returns the bundled rules.yaml.
func Rules() File {
	b, err := defaults.ReadFile("rules.yaml")
	if err != nil {
		panic("replayctl: rules.yaml is not embedded: " + err.Error())
	}
	return File{Name: "rules.yaml", Text: string(b)}
}

// Policies returns the bundled policy modules and their tests
// (*_test.rego), each sorted by name.
func Policies() (policies, tests []File) {
	err := fs.WalkDir(defaults, "policies", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := defaults.ReadFile(p)
		if err != nil {
			return err
		}
		f := File{Name: strings.TrimPrefix(p, "policies/"), Text: string(b)}
		if strings.HasSuffix(path.Base(p), "_test.rego") {
			tests = append(tests, f)
		} else {
			policies = append(policies, f)
		}
		return nil
	})
	if err != nil {
		panic("replayctl: policies/ is not embedded: " + err.Error())
	}
	sort.Slice(policies, func(i, j int) bool { return policies[i].Name < policies[j].Name })
	sort.Slice(tests, func(i, j int) bool { return tests[i].Name < tests[j].Name })
	return policies, tests
}
