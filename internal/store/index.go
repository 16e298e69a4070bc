package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gobwas/glob"

	"github.com/replayctl/replayctl/internal/entry"
)

// ErrNotIndexed: a bbolt file written before indexes existed, opened
// read-only, has no indexes to read (a read-write open builds them once).
// Callers fall back to a scan.
var ErrNotIndexed = errors.New("the state file has no indexes yet (any read-write open, such as the next reconcile, builds them)")

// ErrBadCursor: a page cursor that this store did not hand out.
var ErrBadCursor = errors.New("bad page cursor (pass the next_cursor of the previous page, or none)")

// Indexed is what a backend offers for reads that do not grow with the
// store: cursor pages, counters and per-hour series, all kept up to date in
// the same transaction as the entries and audit records they describe.
type Indexed interface {
	// Page returns up to limit entries matching f after cursor ("" = from
	// the start), in ref order, without their payloads.
	Page(ctx context.Context, f EntryFilter, cursor string, limit int) (*EntryPage, error)
	// Counters returns the current counts.
	Counters(ctx context.Context) (*Counters, error)
	// Series returns the per-hour counts of the hours in [from, to].
	Series(ctx context.Context, from, to time.Time) ([]HourCount, error)
}

// EntryFilter selects entries for Page. Empty fields select everything.
// States, classes, actions and sources compare case-insensitively.
type EntryFilter struct {
	States  []string
	Classes []string
	Actions []string
	Sources []string
	// Topic is a glob as in rules.yaml, '.' the separator: '*' matches
	// within one segment, '**' across segments ("orders.**").
	Topic string
	// Topics are more globs: an entry matches when its topic matches any
	// of them or Topic (a union of the topics' index ranges).
	Topics []string
	// Labels must all be present with these values.
	Labels map[string]string
	// Q is a case-insensitive substring of the entry's ref, id, idempotency
	// key, topic or message.
	Q string
	// FirstSeenBefore keeps entries first seen before it (an age filter:
	// now minus the age).
	FirstSeenBefore time.Time
	// LastFailedBy keeps entries whose last failure (or, without one,
	// first-seen time: LastFailure) is at or before it: the console's and
	// bulk filters' "older than", now minus the age.
	LastFailedBy time.Time

	topic  *glob.Pattern   // Topic compiled (prepare)
	topics []*glob.Pattern // Topics compiled (prepare)
}

// hasTopic reports whether the filter names any topic glob.
func (f *EntryFilter) HasTopic() bool { return f.Topic != "" || len(f.Topics) > 0 }

// ErrBadFilter: a filter that cannot be applied (a malformed topic glob).
var ErrBadFilter = errors.New("bad filter")

// prepare compiles the topic glob once.
func (f *EntryFilter) Prepare() error {
	if f.Topic != "" && f.topic == nil {
		g, err := glob.Compile(f.Topic, '.')
		if err != nil {
			return fmt.Errorf("%w: topic glob %q: %v", ErrBadFilter, f.Topic, err)
		}
		f.topic = g
	}
	if len(f.Topics) > 0 && f.topics == nil {
		for _, t := range f.Topics {
			g, err := glob.Compile(t, '.')
			if err != nil {
				return fmt.Errorf("%w: topic glob %q: %v", ErrBadFilter, t, err)
			}
			f.topics = append(f.topics, g)
		}
	}
	return nil
}

// TopicMatch reports whether topic passes the filter's topic glob.
func (f *EntryFilter) TopicMatch(topic string) bool {
	if !f.HasTopic() {
		return true
	}
	if f.Prepare() != nil {
		return false
	}
	if f.topic != nil && f.topic.Match(topic) {
		return true
	}
	for _, g := range f.topics {
		if g.Match(topic) {
			return true
		}
	}
	return false
}

// EntryPage is one page of a cursor listing.
type EntryPage struct {
	Items []*EntryRecord `json:"items"`
	// Next is the cursor of the next page; "" when there is none.
	Next string `json:"next_cursor,omitempty"`
	// Total counts the matching entries; when TotalExact is false the
	// filter had parts no counter covers (labels, q, age, a topic with other
	// filters) and Total is an upper bound.
	Total      int64 `json:"total"`
	TotalExact bool  `json:"total_exact"`
}

// Match reports whether r passes the filter.
func (f *EntryFilter) Match(r *EntryRecord) bool {
	in := func(list []string, v string) bool {
		return len(list) == 0 || slices.ContainsFunc(list, func(s string) bool { return strings.EqualFold(s, v) })
	}
	e := &r.Entry
	if !in(f.States, r.Status) || !in(f.Classes, string(r.Class)) || !in(f.Actions, string(r.Action)) || !in(f.Sources, e.Source) {
		return false
	}
	if !f.TopicMatch(e.Topic) {
		return false
	}
	for k, v := range f.Labels {
		if got, ok := e.Labels[k]; !ok || got != v {
			return false
		}
	}
	if !f.FirstSeenBefore.IsZero() && !r.FirstSeen.Before(f.FirstSeenBefore) {
		return false
	}
	if !f.LastFailedBy.IsZero() && LastFailure(r).After(f.LastFailedBy) {
		return false
	}
	return f.Q == "" || MatchText(e, f.Q)
}

// residual reports whether the filter has parts no counter covers.
func (f *EntryFilter) residual() bool {
	return len(f.Labels) > 0 || f.Q != "" || !f.FirstSeenBefore.IsZero() || !f.LastFailedBy.IsZero()
}

// IsOpen reports whether an entry in this status still needs something
// (the DLQ depth counts these).
func IsOpen(status string) bool { return status != StatusReplayed && status != StatusResolved }

// OpenStates are the statuses IsOpen holds open, in display order: what a
// listing shows by default (the CLI, the API and the console).
func OpenStates() []string {
	out := make([]string, 0, len(Statuses))
	for _, s := range Statuses {
		if IsOpen(s) {
			out = append(out, s)
		}
	}
	return out
}

// Cell counts the entries with one source, class, action and state.
type Cell struct {
	Source string `json:"source"`
	Class  string `json:"class"`
	Action string `json:"action"`
	State  string `json:"state"`
	N      int64  `json:"n"`
}

// Depth counts the open entries of one source and topic.
type Depth struct {
	Source string `json:"source"`
	Topic  string `json:"topic"`
	N      int64  `json:"n"`
}

// SignatureCount counts the entries failing one way (see Signature).
type SignatureCount struct {
	Signature string `json:"signature"`
	Class     string `json:"class"`
	Example   string `json:"example"`
	N         int64  `json:"n"`
}

// Counters are the store's running counts.
type Counters struct {
	Entries int64            `json:"entries"`
	Cells   []Cell           `json:"cells"`
	Topics  map[string]int64 `json:"topics"`
	Open    []Depth          `json:"open"`
	// OldestOpen is the last failure (LastFailure) of the open entry
	// that failed longest ago, the age the list and filters use (zero when
	// none is open; bolt_lastfail.go).
	OldestOpen time.Time        `json:"oldest_open,omitzero"`
	Signatures []SignatureCount `json:"signatures"`
	// Days counts entries by the UTC day they were first seen.
	Days map[string]int64 `json:"days"`
	// Decisions counts recorded decisions that proposed a replay (not a
	// skip); Denied those that did not end in one.
	Decisions int64            `json:"decisions"`
	Denied    int64            `json:"denied"`
	Outcomes  map[string]int64 `json:"outcomes"`
}

// HourCount is one hour's activity.
type HourCount struct {
	Hour      time.Time        `json:"hour"`
	Inflow    int64            `json:"inflow"`  // entries first seen in the hour
	Drained   int64            `json:"drained"` // entries that left the open states (bbolt only)
	Decisions int64            `json:"decisions"`
	Denied    int64            `json:"denied"`
	Outcomes  map[string]int64 `json:"outcomes,omitempty"`

	// InflowByClass splits Inflow by the entries' current class (an entry
	// reclassified moves with it); DrainedByClass splits Drained by the
	// class the entry had when it left the open states (bbolt only).
	InflowByClass  map[string]int64 `json:"inflow_by_class,omitempty"`
	DrainedByClass map[string]int64 `json:"drained_by_class,omitempty"`
}

var (
	digitsRe = regexp.MustCompile(`[0-9]+`)
	hexIDRe  = regexp.MustCompile(`\b[0-9a-f]{8,}\b`)
)

// Signature groups similar failures: the source's own signature when it
// has one (Prodigy), else the reason code and the message with ids and
// numbers blanked out.
func Signature(er *EntryRecord) string {
	e := &er.Entry
	if e.State.ErrorSignature != "" {
		return e.State.ErrorSignature
	}
	msg := strings.ToLower(e.Message)
	msg = hexIDRe.ReplaceAllString(msg, "*")
	msg = digitsRe.ReplaceAllString(msg, "#")
	if len(msg) > 60 {
		msg = msg[:60]
	}
	code := strings.ToLower(e.ReasonCode)
	if code == "" {
		code = "-"
	}
	return code + ": " + msg
}

// MatchText reports whether q (case-insensitive) occurs in the entry's
// ref (its source, scope and id), key, topic or message: the search of
// listings, the console and bulk filters alike.
func MatchText(e *entry.Entry, q string) bool {
	q = strings.ToLower(q)
	for _, v := range []string{e.Ref(), e.IdempotencyKey, e.Topic, e.Message} {
		if strings.Contains(strings.ToLower(v), q) {
			return true
		}
	}
	return false
}
