package replay

import (
	"context"
	"sort"
	"time"

	"github.com/replayctl/replayctl/internal/store"
)

// Stats is the DLQ report: where entries stand, what keeps failing, how
// fast the DLQ grows, how often replays are denied, how long approvals
// take. The last two are the alerts the triage model's write-up asks for.
type Stats struct {
	Entries  int            `json:"entries"`
	ByClass  map[string]int `json:"by_class"`
	ByAction map[string]int `json:"by_action"`
	ByStatus map[string]int `json:"by_status"`
	// Patterns groups entries by error signature, most common first.
	Patterns []Pattern `json:"failure_patterns"`
	// Growth counts entries first seen per day, oldest first.
	Growth []DayCount `json:"growth"`
	// GrowthPerDay is the mean of new entries per day over the last 7 days.
	GrowthPerDay float64 `json:"growth_per_day_7d"`
	// Decisions counts recorded decisions where a replay was proposed;
	// Denied counts those that did not end in a replay (policy, approval,
	// ledger or source said no). DenialRate = Denied / Decisions.
	Decisions  int     `json:"replay_decisions"`
	Denied     int     `json:"replays_denied"`
	DenialRate float64 `json:"replay_denial_rate"`
	// Hourly is the last 24 hours' activity, oldest first, where the store
	// keeps per-hour counters (hours without activity are left out).
	Hourly []store.HourCount `json:"hourly,omitempty"`
	// Breakers are the targets' circuit breakers. They live in a serve
	// process (shared by its runs), so only a serve fills them in (GET
	// /api/stats); none when read from the state file.
	Breakers  []BreakerState `json:"breakers,omitempty"`
	Approvals struct {
		Pending    int    `json:"pending"`
		Decided    int    `json:"decided"`
		LatencyP50 string `json:"latency_p50,omitempty"`
		LatencyP90 string `json:"latency_p90,omitempty"`
		LatencyMax string `json:"latency_max,omitempty"`
	} `json:"approvals"`
}

// Pattern is a group of entries failing the same way.
type Pattern struct {
	Signature string `json:"signature"`
	Count     int    `json:"count"`
	Class     string `json:"class"`
	Example   string `json:"example"`
}

// DayCount is a day's count.
type DayCount struct {
	Day   string `json:"day"`
	Count int    `json:"count"`
}

// Reporter is what stats needs of the store.
type Reporter interface {
	Inventory
	Approvals(ctx context.Context, fn func(*store.Approval) error) error
}

// Signature groups similar failures: the source's own signature when it
// has one (an error signature), else the reason code and the message with ids and
// numbers blanked out.
func Signature(er *store.EntryRecord) string { return store.Signature(er) }

// ComputeStats computes the stats at now from the store's counters and
// hourly series: the cost does not grow with the store.
func ComputeStats(ctx context.Context, s Reporter, now time.Time) (*Stats, error) {
	c, err := s.Counters(ctx)
	if err != nil {
		return nil, err
	}
	return statsFromCounters(ctx, s, c, now)
}

func statsFromCounters(ctx context.Context, s Reporter, c *store.Counters, now time.Time) (*Stats, error) {
	st := &Stats{Entries: int(c.Entries), ByClass: map[string]int{}, ByAction: map[string]int{}, ByStatus: map[string]int{}, Patterns: []Pattern{}, Growth: []DayCount{}}
	for _, cl := range c.Cells {
		st.ByClass[cl.Class] += int(cl.N)
		st.ByAction[cl.Action] += int(cl.N)
		st.ByStatus[cl.State] += int(cl.N)
	}
	for _, sc := range c.Signatures {
		if len(st.Patterns) == 10 {
			break
		}
		st.Patterns = append(st.Patterns, Pattern{Signature: sc.Signature, Count: int(sc.N), Class: sc.Class, Example: sc.Example})
	}
	days := map[string]int{}
	for d, n := range c.Days {
		days[d] = int(n)
	}
	growth(st, days, now)
	st.Decisions, st.Denied = int(c.Decisions), int(c.Denied)
	if st.Decisions > 0 {
		st.DenialRate = float64(st.Denied) / float64(st.Decisions)
	}
	h, err := s.Series(ctx, now.Add(-23*time.Hour), now)
	if err != nil {
		return nil, err
	}
	st.Hourly = h
	return st, approvalStats(ctx, s, st)
}

func growth(st *Stats, days map[string]int, now time.Time) {
	for d, n := range days {
		st.Growth = append(st.Growth, DayCount{Day: d, Count: n})
	}
	sort.Slice(st.Growth, func(i, j int) bool { return st.Growth[i].Day < st.Growth[j].Day })
	week := 0
	for d, n := range days {
		if t, err := time.Parse("2006-01-02", d); err == nil && now.Sub(t) < 7*24*time.Hour {
			week += n
		}
	}
	st.GrowthPerDay = float64(week) / 7
}

func approvalStats(ctx context.Context, s Reporter, st *Stats) error {
	var lat []time.Duration
	err := s.Approvals(ctx, func(a *store.Approval) error {
		switch {
		case a.State == store.ApprovalPending:
			st.Approvals.Pending++
		case a.State == store.ApprovalApproved || a.State == store.ApprovalRejected:
			st.Approvals.Decided++
			lat = append(lat, a.DecidedAt.Sub(a.RequestedAt))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		q := func(f float64) string { return lat[int(f*float64(len(lat)-1))].Round(time.Second).String() }
		st.Approvals.LatencyP50, st.Approvals.LatencyP90, st.Approvals.LatencyMax = q(0.5), q(0.9), q(1)
	}
	return nil
}
