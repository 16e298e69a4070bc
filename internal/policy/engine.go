package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/triage"
)

// LoadEngine reads the rules file and the policy directory, compiles the
// policy once and returns the decision engine with the snapshot of every
// file it was built from. Problems in both files are reported together.
func LoadEngine(ctx context.Context, rulesPath, policyDir string, timeout time.Duration) (*triage.Engine, triage.Snapshot, error) {
	ce := &triage.ConfigError{}
	collect := func(err error) error {
		var c *triage.ConfigError
		if errors.As(err, &c) {
			ce.Problems = append(ce.Problems, c.Problems...)
			return nil
		}
		return err
	}
	var rules *triage.Rules
	data, err := os.ReadFile(rulesPath)
	if err != nil {
		ce.Problems = append(ce.Problems, triage.Problem{File: rulesPath, Msg: fmt.Sprintf("cannot read rules: %v", errors.Unwrap(err))})
	} else {
		rules, err = triage.ParseRules(rulesPath, data)
		if err := collect(err); err != nil {
			return nil, triage.Snapshot{}, err
		}
	}
	policies, _, err := ReadDir(policyDir)
	if err := collect(err); err != nil {
		return nil, triage.Snapshot{}, err
	}
	var eng *Engine
	if len(policies) > 0 {
		eng, err = New(ctx, policies, timeout)
		if err := collect(err); err != nil {
			return nil, triage.Snapshot{}, err
		}
	}
	if len(ce.Problems) > 0 {
		return nil, triage.Snapshot{}, ce
	}
	snap := triage.NewSnapshot(triage.SourceFile{Name: filepath.Base(rulesPath), Text: string(data)}, snapshotNames(policyDir, policies))
	return &triage.Engine{Rules: rules, Policy: eng, Snapshot: snap.ID}, snap, nil
}

// EngineFromSnapshot rebuilds the decision engine from a stored snapshot's
// rules and policy text, to re-run a recorded decision exactly.
func EngineFromSnapshot(ctx context.Context, snap triage.Snapshot, timeout time.Duration) (*triage.Engine, error) {
	rules, err := triage.ParseRules(snap.Rules.Name, []byte(snap.Rules.Text))
	if err != nil {
		return nil, err
	}
	eng, err := New(ctx, snap.Policies, timeout)
	if err != nil {
		return nil, err
	}
	if got := triage.NewSnapshot(snap.Rules, snap.Policies).ID; got != snap.ID {
		return nil, fmt.Errorf("snapshot text does not hash to its id %s (got %s)", snap.ID, got)
	}
	return &triage.Engine{Rules: rules, Policy: eng, Snapshot: snap.ID}, nil
}

// snapshotNames names each policy by its slash-separated path inside dir,
// so that the snapshot id depends on what the files say and how they are
// laid out, never on how --policies was typed ("policies", "./policies/",
// an absolute path): otherwise a valid approval would be refused as stale
// and every decision re-recorded after a change of working directory.
// Compilation keeps the paths as typed so that errors point at real files.
func snapshotNames(dir string, files []triage.SourceFile) []triage.SourceFile {
	out := make([]triage.SourceFile, len(files))
	for i, f := range files {
		name := filepath.Base(f.Name)
		if rel, err := filepath.Rel(dir, f.Name); err == nil && !strings.HasPrefix(rel, "..") {
			name = rel
		}
		out[i] = triage.SourceFile{Name: filepath.ToSlash(name), Text: f.Text}
	}
	return out
}
