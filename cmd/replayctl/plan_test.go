package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/source"
)

// plan decides on every core (issue 16) and must still print the decisions
// in the order the source holds the entries, malformed ones included. With
// more workers than cores and a corpus many batches long, any reordering
// between the workers would show.
func TestPlanPrintsDecisionsInInputOrderOnEveryCore(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	spec, err := gen.Write(jsonl.GenFormat(), filepath.Join(t.TempDir(), "dlq.jsonl"), gen.Options{N: 2000, Seed: 7, Malformed: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, e.ID)
	}
	var out, errOut bytes.Buffer
	code := run([]string{"plan", "--source", spec, "--rules", "../../rules.yaml", "--policies", "../../policies",
		"--db", filepath.Join(t.TempDir(), "none.db"), "-o", "json"}, nil, &out, &errOut)
	if code != 0 {
		t.Fatalf("plan exited %d: %s", code, errOut.String())
	}
	var got []struct {
		EntryID string `json:"entry_id"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d decisions for %d entries", len(got), len(want))
	}
	for i := range want {
		if got[i].EntryID != want[i] {
			t.Fatalf("decision %d is for %s, want %s: output not in input order", i, got[i].EntryID, want[i])
		}
	}
}
