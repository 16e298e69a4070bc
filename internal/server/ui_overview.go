package server

import (
	"context"
	"html/template"
	"net/url"
	"slices"
	"sort"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

// Overview time buckets: the last 24 hours, by hour.
const (
	overviewBuckets = 24
	overviewBucket  = time.Hour
)

// linkedCount is a count that links to the entries (or approvals) behind it.
type linkedCount struct {
	Name string
	N    int
	Href string
	Bar  template.HTML
}

// overview is what the overview page shows.
type overview struct {
	Open, Total     int
	OpenHref        string
	Oldest          string // age of the oldest open entry
	OldestHref      string // the oldest open entry, or the open ones oldest first
	ByClass         []linkedCount
	BySource        []linkedCount
	ByTopic         []linkedCount
	ByState         []linkedCount
	Patterns        []pattern
	ApprovalsGroups []linkedCount
	ApprovalsOldest string
	Flow            template.HTML // inflow by class vs drained
	Outcomes        template.HTML // replay outcomes and denials
	LastRun         *Run
	// Breakers are this serve's targets' circuit breakers.
	Breakers []replay.BreakerState
	NextRun  time.Time

	// FlowByClass is one small chart per class: its inflow vs its drained.
	FlowByClass []classFlow
}

// overviewCounts is what the overview counts, from the store's counters
// or, for a file never indexed, from a scan.
type overviewCounts struct {
	total, open                         int
	byClass, bySource, byTopic, byState map[string]int
	patterns                            []pattern
	oldest                              time.Time
	oldestHref                          string
	inflow, outcomes                    map[string][]int
	// drainedBy splits drained by class (from the store's series; a scan
	// of an unindexed file cannot tell, and leaves it empty).
	drainedBy       map[string][]int
	drained, denied []int
}

// classFlow is one class's inflow vs drained chart.
type classFlow struct {
	Class string
	Chart template.HTML
}

// maxClassCharts bounds the per-class charts (the busiest classes).
const maxClassCharts = 6

func newOverviewCounts() *overviewCounts {
	return &overviewCounts{byClass: map[string]int{}, bySource: map[string]int{}, byTopic: map[string]int{}, byState: map[string]int{},
		inflow: map[string][]int{}, outcomes: map[string][]int{}, drainedBy: map[string][]int{},
		drained: make([]int, overviewBuckets), denied: make([]int, overviewBuckets)}
}

// overviewBucketOf is t's hour bucket since start, or -1 before it.
func overviewBucketOf(start, t time.Time) int {
	if t.Before(start) {
		return -1
	}
	return min(int(t.Sub(start)/overviewBucket), overviewBuckets-1)
}

// overviewData is the one place the overview reads the store: its
// per-bucket counters and hourly series (issue 16), so a page costs the
// same at 100k entries as at 10.
func (u *ui) overviewData(ctx context.Context) (*overview, error) {
	s := u.s.cfg.Store
	now := u.s.cfg.Now()
	start := now.Truncate(overviewBucket).Add(-(overviewBuckets - 1) * overviewBucket)
	c, err := overviewIndexed(ctx, s, start, now)
	if err != nil {
		return nil, err
	}
	o := &overview{Total: c.total, Open: c.open, Patterns: c.patterns, OldestHref: c.oldestHref}
	if !c.oldest.IsZero() {
		o.Oldest = humanAge(now.Sub(c.oldest))
	}
	openLink := func(k, v string) string {
		q := url.Values{"state": {"open"}}
		if k != "" {
			q.Set(k, v)
		}
		return "/entries?" + q.Encode()
	}
	sort.Slice(o.Patterns, func(i, j int) bool {
		if o.Patterns[i].N != o.Patterns[j].N {
			return o.Patterns[i].N > o.Patterns[j].N
		}
		return o.Patterns[i].Signature < o.Patterns[j].Signature
	})
	o.Patterns = o.Patterns[:min(len(o.Patterns), 8)]
	o.OpenHref = openLink("", "")
	o.ByClass = linked(c.byClass, 0, func(n string) string { return openLink("class", n) })
	o.BySource = linked(c.bySource, 0, func(n string) string { return openLink("source", n) })
	o.ByTopic = linked(c.byTopic, 10, func(n string) string { return openLink("topic", n) })
	o.ByState = linked(c.byState, 0, func(n string) string { return "/entries?state=" + url.QueryEscape(n) })
	inflow, drained, outcomes, denied := c.inflow, c.drained, c.outcomes, c.denied
	labels := make([]string, overviewBuckets)
	for i := range labels {
		labels[i] = start.Add(time.Duration(i) * overviewBucket).UTC().Format("15h")
	}
	o.Flow = columnChart("New entries by class and entries drained per hour, last 24 h", labels,
		stackOf(inflow, func(i int, name string) string { return palette[i%len(palette)] }),
		&series{Name: "drained (replayed or resolved)", Color: "#D55E00", Values: drained})
	o.FlowByClass = classFlows(labels, inflow, c.drainedBy)
	o.Outcomes = columnChart("Replay outcomes and replays denied per hour, last 24 h", labels,
		stackOf(outcomes, func(i int, name string) string {
			switch name {
			case "succeeded":
				return "#009E73"
			case "failed":
				return "#D55E00"
			}
			return palette[(i+4)%len(palette)]
		}),
		&series{Name: "replays denied (policy, approval, ledger)", Color: "#CC79A7", Values: denied})

	// Approvals waiting, by group: the open requests' index, not every
	// request ever made.
	waiting := map[string]int{}
	var oldestAsk time.Time
	if err := pendingApprovals(ctx, s, now, func(a *store.Approval) {
		waiting[a.ApproverGroup]++
		if oldestAsk.IsZero() || a.RequestedAt.Before(oldestAsk) {
			oldestAsk = a.RequestedAt
		}
	}); err != nil {
		return nil, err
	}
	o.ApprovalsGroups = linked(waiting, 0, func(n string) string { return "/approvals?group=" + url.QueryEscape(n) })
	if !oldestAsk.IsZero() {
		o.ApprovalsOldest = humanAge(now.Sub(oldestAsk))
	}
	o.Breakers = u.s.breakerStates()
	if runs := u.recentRuns(); len(runs) > 0 {
		o.LastRun = &runs[0]
		if u.s.cfg.Every > 0 {
			o.NextRun = runs[0].Started.Add(u.s.cfg.Every)
		}
	}
	return o, nil
}

// pendingApprovals calls fn with each pending approval request (not
// expired at now), from the store's index of open requests.
func pendingApprovals(ctx context.Context, s Store, now time.Time, fn func(*store.Approval)) error {
	return s.PendingApprovals(ctx, func(a *store.Approval) error {
		// The index holds stored state; a request past its expiry is
		// expired, as approval.Service says.
		if a.State == store.ApprovalPending && (a.ExpiresAt.IsZero() || !now.After(a.ExpiresAt)) {
			fn(a)
		}
		return nil
	})
}

// overviewIndexed reads the overview's numbers from the store's counters
// and hourly series.
func overviewIndexed(ctx context.Context, ix Store, start, now time.Time) (*overviewCounts, error) {
	cnt, err := ix.Counters(ctx)
	if err != nil {
		return nil, err
	}
	c := newOverviewCounts()
	c.total = int(cnt.Entries)
	for _, cell := range cnt.Cells {
		c.byState[cell.State] += int(cell.N)
		if slices.Contains(openStates, cell.State) {
			c.byClass[cell.Class] += int(cell.N)
			c.bySource[cell.Source] += int(cell.N)
		}
	}
	for _, d := range cnt.Open {
		c.open += int(d.N)
		c.byTopic[d.Topic] += int(d.N)
	}
	for _, sc := range cnt.Signatures {
		if sc.N > 0 {
			c.patterns = append(c.patterns, pattern{Signature: sc.Signature, Class: sc.Class, Example: sc.Example, N: int(sc.N)})
		}
	}
	// The counters keep the oldest open entry's last failure, not its
	// ref: the age links to the open entries by last failure, oldest
	// first, where it heads the list.
	c.oldest, c.oldestHref = cnt.OldestOpen, "/entries?state=open&sort=oldest"
	hours, err := ix.Series(ctx, start, now)
	if err != nil {
		return nil, err
	}
	add := func(m map[string][]int, name string, i int, n int64) {
		if m[name] == nil {
			m[name] = make([]int, overviewBuckets)
		}
		m[name][i] += int(n)
	}
	for _, h := range hours {
		i := overviewBucketOf(start, h.Hour)
		if i < 0 {
			continue
		}
		// Inflow by class; what no class counter covers (an entry written
		// without a first-seen time) shows as its own layer.
		rest := h.Inflow
		for class, n := range h.InflowByClass {
			add(c.inflow, class, i, n)
			rest -= n
		}
		if rest > 0 {
			add(c.inflow, unclassed, i, rest)
		}
		for class, n := range h.DrainedByClass {
			add(c.drainedBy, class, i, n)
		}
		c.drained[i] += int(h.Drained)
		c.denied[i] += int(h.Denied)
		for name, n := range h.Outcomes {
			if c.outcomes[name] == nil {
				c.outcomes[name] = make([]int, overviewBuckets)
			}
			c.outcomes[name][i] += int(n)
		}
	}
	return c, nil
}

// pattern is a group of open entries failing the same way.
type pattern struct {
	Signature, Class, Example string
	N                         int
}

// linked sorts counts (largest first), keeps the top n (0: all) and
// gives each its link and bar.
func linked(m map[string]int, n int, href func(string) string) []linkedCount {
	out := make([]linkedCount, 0, len(m))
	peak := 0
	for k, v := range m {
		out = append(out, linkedCount{Name: k, N: v, Href: href(k)})
		peak = max(peak, v)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Name < out[j].Name
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	for i := range out {
		out[i].Bar = barSVG(out[i].N, peak)
	}
	return out
}

// unclassed names inflow no per-class counter covers.
const unclassed = "(class unknown)"

// classFlows draws each class's inflow (columns) vs drained (line), the
// busiest classes first.
func classFlows(labels []string, inflow, drained map[string][]int) []classFlow {
	total := map[string]int{}
	for _, m := range []map[string][]int{inflow, drained} {
		for class, vs := range m {
			for _, v := range vs {
				total[class] += v
			}
		}
	}
	classes := make([]string, 0, len(total))
	for class, n := range total {
		if n > 0 && class != unclassed {
			classes = append(classes, class)
		}
	}
	sort.Slice(classes, func(i, j int) bool {
		if total[classes[i]] != total[classes[j]] {
			return total[classes[i]] > total[classes[j]]
		}
		return classes[i] < classes[j]
	})
	classes = classes[:min(len(classes), maxClassCharts)]
	zero := make([]int, len(labels))
	or := func(v []int) []int {
		if v == nil {
			return zero
		}
		return v
	}
	out := make([]classFlow, 0, len(classes))
	for _, class := range classes {
		name := class
		if name == "" {
			name = "(none)"
		}
		out = append(out, classFlow{Class: name, Chart: columnChart(name+": new entries vs drained per hour, last 24 h", labels,
			[]series{{Name: name + " new", Color: "#0072B2", Values: or(inflow[class])}},
			&series{Name: name + " drained", Color: "#D55E00", Values: or(drained[class])})})
	}
	return out
}

func stackOf(m map[string][]int, color func(int, string) string) []series {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]series, 0, len(names))
	for i, k := range names {
		name := k
		if name == "" {
			name = "(none)"
		}
		out = append(out, series{Name: name, Color: color(i, k), Values: m[k]})
	}
	return out
}
