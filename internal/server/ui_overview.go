package server

import (
	"context"
	"html/template"
	"net/url"
	"slices"
	"sort"
	"time"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
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
	OldestRef       string
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
	NextRun         time.Time
}

// overviewData is the one place the overview reads the store. Today it
// scans the entries and the audit chain's last day; the lead points it
// at the store's per-bucket counters when they land.
func (u *ui) overviewData(ctx context.Context) (*overview, error) {
	s := u.s.cfg.Store
	now := u.s.cfg.Now()
	start := now.Truncate(overviewBucket).Add(-(overviewBuckets - 1) * overviewBucket)
	bucket := func(t time.Time) int {
		if t.Before(start) {
			return -1
		}
		return min(int(t.Sub(start)/overviewBucket), overviewBuckets-1)
	}
	o := &overview{}
	byClass, bySource, byTopic, byState := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	inflow := map[string][]int{}
	patterns := map[string]*pattern{}
	var oldest time.Time
	err := s.Entries(ctx, func(er *store.EntryRecord) error {
		o.Total++
		byState[er.Status]++
		if i := bucket(er.FirstSeen); i >= 0 {
			c := string(er.Class)
			if inflow[c] == nil {
				inflow[c] = make([]int, overviewBuckets)
			}
			inflow[c][i]++
		}
		if !slices.Contains(openStates, er.Status) {
			return nil
		}
		o.Open++
		byClass[string(er.Class)]++
		bySource[er.Entry.Source]++
		byTopic[er.Entry.Topic]++
		sig := replay.Signature(er)
		if p := patterns[sig]; p != nil {
			p.N++
		} else {
			patterns[sig] = &pattern{Signature: sig, Class: string(er.Class), Example: er.Entry.Ref(), N: 1}
		}
		when := er.Entry.LastFailure
		if when.IsZero() {
			when = er.FirstSeen
		}
		if oldest.IsZero() || when.Before(oldest) {
			oldest, o.OldestRef = when, er.Entry.Ref()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !oldest.IsZero() {
		o.Oldest = humanAge(now.Sub(oldest))
	}
	openLink := func(k, v string) string {
		q := url.Values{"state": {"open"}}
		if k != "" {
			q.Set(k, v)
		}
		return "/entries?" + q.Encode()
	}
	for _, p := range patterns {
		o.Patterns = append(o.Patterns, *p)
	}
	sort.Slice(o.Patterns, func(i, j int) bool {
		if o.Patterns[i].N != o.Patterns[j].N {
			return o.Patterns[i].N > o.Patterns[j].N
		}
		return o.Patterns[i].Signature < o.Patterns[j].Signature
	})
	o.Patterns = o.Patterns[:min(len(o.Patterns), 8)]
	o.OpenHref = openLink("", "")
	o.ByClass = linked(byClass, 0, func(n string) string { return openLink("class", n) })
	o.BySource = linked(bySource, 0, func(n string) string { return openLink("source", n) })
	o.ByTopic = linked(byTopic, 10, func(n string) string { return openLink("topic", n) })
	o.ByState = linked(byState, 0, func(n string) string { return "/entries?state=" + url.QueryEscape(n) })

	// Drained, outcomes and denials per hour, from the audit chain.
	drained := make([]int, overviewBuckets)
	outcomes := map[string][]int{}
	denied := make([]int, overviewBuckets)
	from, err := firstSince(ctx, s, start)
	if err != nil {
		return nil, err
	}
	err = s.AuditRange(ctx, from, func(_ uint64, sealed audit.Sealed, derr error) error {
		if derr != nil {
			return nil // the audit page and audit verify report it
		}
		r, err := sealed.Open()
		if err != nil {
			return nil
		}
		i := bucket(r.Time)
		if i < 0 {
			return nil
		}
		switch r.Kind {
		case audit.KindOutcome:
			if outcomes[r.Outcome] == nil {
				outcomes[r.Outcome] = make([]int, overviewBuckets)
			}
			outcomes[r.Outcome][i]++
			if r.Outcome == "succeeded" {
				drained[i]++
			}
		case audit.KindResolve:
			drained[i]++
		case audit.KindDecision:
			if r.Decision != nil && r.Decision.ProposedAction == triage.AutoReplay && r.Action != triage.AutoReplay && r.Action != triage.Skip {
				denied[i]++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	labels := make([]string, overviewBuckets)
	for i := range labels {
		labels[i] = start.Add(time.Duration(i) * overviewBucket).UTC().Format("15h")
	}
	o.Flow = columnChart("New entries by class and entries drained per hour, last 24 h", labels,
		stackOf(inflow, func(i int, name string) string { return palette[i%len(palette)] }),
		&series{Name: "drained (replayed or resolved)", Color: "#D55E00", Values: drained})
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

	// Approvals waiting, by group.
	waiting := map[string]int{}
	var oldestAsk time.Time
	list, err := u.s.approvals().List(ctx, approval.Filter{State: store.ApprovalPending})
	if err != nil {
		return nil, err
	}
	for _, a := range list {
		waiting[a.ApproverGroup]++
		if oldestAsk.IsZero() || a.RequestedAt.Before(oldestAsk) {
			oldestAsk = a.RequestedAt
		}
	}
	o.ApprovalsGroups = linked(waiting, 0, func(n string) string { return "/approvals?group=" + url.QueryEscape(n) })
	if !oldestAsk.IsZero() {
		o.ApprovalsOldest = humanAge(now.Sub(oldestAsk))
	}
	if runs := u.recentRuns(); len(runs) > 0 {
		o.LastRun = &runs[0]
		if u.s.cfg.Every > 0 {
			o.NextRun = runs[0].Started.Add(u.s.cfg.Every)
		}
	}
	return o, nil
}

// pattern is a group of open entries failing the same way.
type pattern struct {
	Signature, Class, Example string
	N                         int
}

// firstSince finds the first audit record at or after t by binary search
// on seq (records are appended in time order), so the overview reads the
// last day of the chain, not all of it.
func firstSince(ctx context.Context, r audit.Reader, t time.Time) (uint64, error) {
	head, _, err := r.AuditHead(ctx)
	if err != nil {
		return 0, err
	}
	lo, hi := uint64(1), head+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		rec, err := audit.Get(ctx, r, mid)
		if err != nil {
			// An unreadable record: start from the beginning rather than
			// guess (the scan skips it).
			return 1, nil //nolint:nilerr // reported by the audit page
		}
		if rec.Time.Before(t) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
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
