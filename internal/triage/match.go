package triage

import (
	"fmt"
	"strings"

	"github.com/replayctl/replayctl/internal/entry"
)

// matches reports whether every condition of m holds for the entry.
func (m *Match) matches(e *entry.Entry, c Class) bool {
	if len(m.ReasonCode) > 0 && !containsFold(m.ReasonCode, strings.TrimSpace(e.ReasonCode)) {
		return false
	}
	if len(m.Class) > 0 && !containsFold(m.Class, string(c)) {
		return false
	}
	if len(m.topics) > 0 && !matchAny(m.topics, e.Topic) {
		return false
	}
	if len(m.Source) > 0 && !containsFold(m.Source, e.Source) {
		return false
	}
	if m.MinAttempts != nil && e.Attempts < *m.MinAttempts {
		return false
	}
	if m.MaxAttempts != nil && e.Attempts > *m.MaxAttempts {
		return false
	}
	for k, v := range m.Labels {
		if got, ok := e.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ID names the rule in decisions and audit records: its name, or its place
// in the file.
func (rl *Rule) ID(file string) string {
	if rl.Name != "" {
		return rl.Name
	}
	return fmt.Sprintf("%s:%d", file, rl.line)
}

// firstMatch returns the first rule whose match holds, or nil.
func (r *Rules) firstMatch(e *entry.Entry, c Class) *Rule {
	for i := range r.DLQRules {
		if r.DLQRules[i].Match.matches(e, c) {
			return &r.DLQRules[i]
		}
	}
	return nil
}

// TargetFor returns the first target whose match holds for the entry, or nil.
func (r *Rules) TargetFor(e *entry.Entry) *Target {
	for i := range r.Targets {
		t := &r.Targets[i]
		if len(t.topic) > 0 && !matchAny(t.topic, e.Topic) {
			continue
		}
		if len(t.Match.Source) > 0 && !containsFold(t.Match.Source, e.Source) {
			continue
		}
		return t
	}
	return nil
}

// TargetName names a target in reports.
func (t *Target) TargetName() string {
	if t.Name != "" {
		return t.Name
	}
	return fmt.Sprintf("targets line %d", t.line)
}
