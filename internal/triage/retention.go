package triage

import (
	"time"

	"gopkg.in/yaml.v3"
)

// DefaultClosedRetention is how long closed entries (replayed, resolved)
// and their records stay in the store when rules.yaml does not say.
const DefaultClosedRetention = 90 * 24 * time.Hour

// Retention is rules.yaml's retention section:
//
//	retention:
//	  closed: 90d   # closed entries and their records, then `store prune` archives them
//
// Open entries are never pruned, whatever their age.
type Retention struct {
	Closed *Period `yaml:"closed"`

	lines map[string]int
}

// UnmarshalYAML checks keys strictly.
func (r *Retention) UnmarshalYAML(n *yaml.Node) error {
	type plain Retention
	lines, err := strictDecode(n, (*plain)(r))
	r.lines = lines
	return err
}

// ClosedFor is how long closed entries are kept.
func (r *Retention) ClosedFor() time.Duration {
	if r.Closed == nil {
		return DefaultClosedRetention
	}
	return time.Duration(*r.Closed)
}

func (r *Retention) validate(cerr *ConfigError, f string, line int) {
	if l, ok := r.lines["closed"]; ok {
		line = l
	}
	if r.Closed != nil && *r.Closed < Period(time.Hour) {
		cerr.add(f, line, "retention.closed: %s is too short (want at least 1h, such as 90d): pruning races the replays it archives", *r.Closed)
	}
}
