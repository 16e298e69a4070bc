package store

import (
	"slices"
	"time"
)

// Lineage is one replay lineage: the entries a system created by replaying
// one another (a job and the jobs its system's retry created, records of
// the same goal and context, messages carrying replayctl's lineage
// header; each connector's lineage.go says how). max_replays counts the replays of all its members
// together, from the last release of its budget.
type Lineage struct {
	// Root names the lineage (entry.Entry.Lineage).
	Root string `json:"root"`
	// Members are the refs of the entries seen in it, first seen first.
	Members []string `json:"members"`
	// Released is the lineage's replay count when a person last released
	// its budget (`dlq release-lineage`): replays count again from there.
	Released   int       `json:"released,omitempty"`
	ReleasedBy string    `json:"released_by,omitempty"`
	ReleasedAt time.Time `json:"released_at,omitzero"`
	// ReleaseReason is the person's reason, as audited.
	ReleaseReason string `json:"release_reason,omitempty"`
}

// Join adds ref to the lineage's members and reports whether it was new.
func (l *Lineage) Join(ref string) bool {
	if slices.Contains(l.Members, ref) {
		return false
	}
	l.Members = append(l.Members, ref)
	return true
}
