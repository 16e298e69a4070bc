package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/group"
)

// Failure groups (issue 31). Every entry belongs to the group of its
// failure signature (package group). The group is a facet of the entry
// like its state or topic: both backends keep, in the entry's own write
// transaction, the group's total and open counters, its inflow per hour
// and a members index ordered by first-seen time, so listing the groups
// reads a few keys per group and never the entries. A group's lifecycle
// (open, acknowledged, held, resolved) is a small record by group id.

// Group lifecycle states.
const (
	GroupOpen         = "open"
	GroupAcknowledged = "acknowledged"
	GroupHeld         = "held"
	GroupResolved     = "resolved"
)

// ErrBadGroup: no such group, or a lifecycle change that does not apply.
var ErrBadGroup = errors.New("bad group")

// GroupID is the id of the group r belongs to (without building its key:
// every entry write computes it).
func GroupID(r *EntryRecord) string {
	if r.Group != nil {
		return r.Group.ID()
	}
	return group.IDOf(&r.Entry, string(r.Class))
}

// GroupKey is the signature r is grouped by: the one its last decision
// recorded (rules.yaml groups), else the default signature.
func GroupKey(r *EntryRecord) group.Key {
	if r.Group != nil {
		return *r.Group
	}
	return group.Of(&r.Entry, string(r.Class))
}

// GroupState is a group's lifecycle: what people decided about it. A group
// no one acted on has none (it is open).
type GroupState struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Note is an acknowledgement's note; Reason a hold's or a resolve's.
	Note   string `json:"note,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Until is when a hold ends by itself (zero: until released).
	Until time.Time `json:"until,omitzero"`
	By    string    `json:"by,omitempty"`
	At    time.Time `json:"at"`
	// AuditSeq is the audit record of the change.
	AuditSeq uint64 `json:"audit_seq,omitempty"`
}

// HoldActive reports whether st holds its group's entries at now.
func (st *GroupState) HoldActive(now time.Time) bool {
	return st != nil && st.State == GroupHeld && (st.Until.IsZero() || now.Before(st.Until))
}

// GroupSummary is a group as `groups list` shows it.
type GroupSummary struct {
	ID    string    `json:"id"`
	Key   group.Key `json:"signature"`
	Total int64     `json:"total"`
	Open  int64     `json:"open"`
	// Hourly is the inflow (entries first seen) of the last 24 hours,
	// oldest first, the current hour last; LastHour is that last one,
	// LastDay their sum.
	Hourly   []int64   `json:"hourly"`
	LastHour int64     `json:"last_hour"`
	LastDay  int64     `json:"last_day"`
	First    time.Time `json:"first_seen,omitzero"`
	Last     time.Time `json:"last_seen,omitzero"`
	// Sample is the newest entry of the group (its ref and message).
	Sample        string      `json:"sample,omitempty"`
	SampleMessage string      `json:"sample_message,omitempty"`
	State         string      `json:"state"`
	Lifecycle     *GroupState `json:"lifecycle,omitempty"`
}

// Grouped is what a backend offers about failure groups.
type Grouped interface {
	// Groups returns the groups with entries, largest open count first,
	// their trend counted back from now: the first limit of them (0: all).
	// Only those are read beyond their two counters.
	Groups(ctx context.Context, now time.Time, limit int) ([]GroupSummary, error)
	// Group returns one group (ErrNotFound when it has no entries and no
	// lifecycle record).
	Group(ctx context.Context, id string, now time.Time) (*GroupSummary, error)
	// GroupStates calls fn with every group lifecycle record.
	GroupStates(ctx context.Context, fn func(*GroupState) error) error
}

// finish fills in what is derived: the sample's key and message, the
// trend totals, the state.
func (g *GroupSummary) Finish(sample *EntryRecord, st *GroupState, now time.Time) {
	if sample != nil {
		g.Key = GroupKey(sample)
		g.Sample = sample.Entry.Ref()
		msg := sample.Entry.Message
		if i := strings.IndexAny(msg, "\r\n"); i >= 0 {
			msg = msg[:i]
		}
		if len(msg) > 200 {
			msg = msg[:200]
		}
		g.SampleMessage = strings.ToValidUTF8(msg, "\uFFFD")
	}
	if len(g.Hourly) > 0 {
		g.LastHour = g.Hourly[len(g.Hourly)-1]
	}
	g.LastDay = 0
	for _, n := range g.Hourly {
		g.LastDay += n
	}
	g.State, g.Lifecycle = GroupOpen, st
	if st != nil {
		g.State = st.State
		if st.State == GroupHeld && !st.HoldActive(now) {
			g.State = GroupOpen // expired: the runner audits it and opens it
		}
	}
}

// TrendHours are the starts of the 24 hours Hourly counts, oldest first.
func TrendHours(now time.Time) []time.Time {
	cur := now.UTC().Truncate(time.Hour)
	out := make([]time.Time, 24)
	for i := range out {
		out[i] = cur.Add(time.Duration(i-23) * time.Hour)
	}
	return out
}

// TopGroups sorts gs and keeps the first limit (0: all).
func TopGroups(gs []GroupSummary, limit int) []GroupSummary {
	sortGroups(gs)
	if limit > 0 && len(gs) > limit {
		gs = gs[:limit]
	}
	return gs
}

// sortGroups orders groups largest open count first, then total, then id.
func sortGroups(gs []GroupSummary) {
	sort.Slice(gs, func(i, j int) bool { return groupLess(&gs[i], &gs[j]) })
}

func groupLess(a, b *GroupSummary) bool {
	if a.Open != b.Open {
		return a.Open > b.Open
	}
	if a.Total != b.Total {
		return a.Total > b.Total
	}
	return a.ID < b.ID
}

// ValidGroupState checks a lifecycle record before it is written.
func ValidGroupState(st *GroupState) error {
	if !group.IsID(st.ID) {
		return fmt.Errorf("%w: %q is not a group id (g and 11 hex digits, as `groups list` shows)", ErrBadGroup, st.ID)
	}
	switch st.State {
	case GroupOpen, GroupAcknowledged, GroupResolved:
	case GroupHeld:
		if strings.TrimSpace(st.Reason) == "" {
			return fmt.Errorf("%w: a hold needs a reason", ErrBadGroup)
		}
	default:
		return fmt.Errorf("%w: unknown state %q", ErrBadGroup, st.State)
	}
	return nil
}
