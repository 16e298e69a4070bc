package replay

import (
	"sort"

	"github.com/replayctl/replayctl/internal/triage"
)

// Summary counts decisions by class and action.
type Summary struct {
	Total    int                   `json:"total"`
	ByClass  map[triage.Class]int  `json:"by_class"`
	ByAction map[triage.Action]int `json:"by_action"`
	// Cells counts (class, action) pairs, for the grouped table.
	Cells map[triage.Class]map[triage.Action]int `json:"by_class_and_action"`
	// Unrecognised counts entries no taxonomy or pattern recognised.
	Unrecognised int `json:"unrecognised"`
	// Undecodable counts records that could not be decoded.
	Undecodable int `json:"undecodable"`
}

// NewSummary returns an empty summary.
func NewSummary() *Summary {
	return &Summary{
		ByClass:  map[triage.Class]int{},
		ByAction: map[triage.Action]int{},
		Cells:    map[triage.Class]map[triage.Action]int{},
	}
}

// Add counts one decision.
func (s *Summary) Add(d *triage.Decision) {
	s.Total++
	s.ByClass[d.Class]++
	s.ByAction[d.Action]++
	if s.Cells[d.Class] == nil {
		s.Cells[d.Class] = map[triage.Action]int{}
	}
	s.Cells[d.Class][d.Action]++
	if d.Unrecognised {
		s.Unrecognised++
	}
	if d.Rule == "undecodable" {
		s.Undecodable++
	}
}

// AwaitingPeople counts entries left for approvers or reviewers.
func (s *Summary) AwaitingPeople() int {
	n := 0
	for a, c := range s.ByAction {
		if a.NeedsPerson() {
			n += c
		}
	}
	return n
}

// Actions returns the actions present, in strictness order.
func (s *Summary) Actions() []triage.Action {
	all := []triage.Action{triage.AutoReplay, triage.RequireApproval, triage.ManualReview, triage.Quarantine, triage.Skip}
	var out []triage.Action
	for _, a := range all {
		if s.ByAction[a] > 0 {
			out = append(out, a)
		}
	}
	// Unknown actions (should not happen) still show up.
	var extra []string
	for a := range s.ByAction {
		known := false
		for _, k := range all {
			known = known || k == a
		}
		if !known {
			extra = append(extra, string(a))
		}
	}
	sort.Strings(extra)
	for _, a := range extra {
		out = append(out, triage.Action(a))
	}
	return out
}
