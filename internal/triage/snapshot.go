package triage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// SourceFile is a configuration file's name and its exact text, as kept in
// a policy snapshot.
type SourceFile struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Snapshot is the rules and policy text a decision was made with. Its ID
// is a sha256 over every file's name and text, so any edit gives a new id
// and an old decision can be re-run against exactly what it saw.
type Snapshot struct {
	ID       string       `json:"id"`
	Rules    SourceFile   `json:"rules"`
	Policies []SourceFile `json:"policies"`
}

// NewSnapshot computes the snapshot id; policies must be in a stable
// (sorted by name) order.
func NewSnapshot(rules SourceFile, policies []SourceFile) Snapshot {
	h := sha256.New()
	write := func(f SourceFile) {
		fmt.Fprintf(h, "%d:%s%d:", len(f.Name), f.Name, len(f.Text))
		h.Write([]byte(f.Text))
	}
	write(rules)
	for _, p := range policies {
		write(p)
	}
	return Snapshot{ID: "sha256:" + hex.EncodeToString(h.Sum(nil)), Rules: rules, Policies: policies}
}
