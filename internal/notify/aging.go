package notify

import (
	"sort"
	"time"
)

// Waiting is one pending approval request, as a reminder sees it.
type Waiting struct {
	ID          string
	Group       string
	RequestedAt time.Time
}

// Aging decides when approvers are reminded of requests that wait too
// long: a request pending for at least After is due, then again every
// Every (After when zero) for as long as it stays pending. The ReplayctlApprovalsAging
// alert pages on the same age; the reminder reaches the approvers first.
type Aging struct {
	After, Every time.Duration
}

// Due returns the requests to remind approvers of at now, oldest first.
// last holds when each request was last reminded of (absent: never).
// It is a pure function of its arguments: the caller keeps last (and
// audits every reminder, so last survives a restart).
func (a Aging) Due(now time.Time, waiting []Waiting, last map[string]time.Time) []Waiting {
	if a.After <= 0 {
		return nil
	}
	every := a.Every
	if every <= 0 {
		every = a.After
	}
	var due []Waiting
	for _, w := range waiting {
		if now.Sub(w.RequestedAt) < a.After {
			continue
		}
		if t, ok := last[w.ID]; ok && now.Sub(t) < every {
			continue
		}
		due = append(due, w)
	}
	sort.SliceStable(due, func(i, j int) bool { return due[i].RequestedAt.Before(due[j].RequestedAt) })
	return due
}
