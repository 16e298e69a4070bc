package replay

import (
	"fmt"
	"math"
	"time"

	"github.com/replayctl/replayctl/internal/store"
)

// BlastRadius is what a bulk operation would touch, shown with every
// preview before anyone presses the button (issue 31): where the replays
// would go, which topics, sources and classes the matching entries come
// from, how many keys the ledger already knows as committed or unknown
// (they are not sent), the span of their failures and how long the
// replays would take at the chosen velocity.
type BlastRadius struct {
	// ByTarget counts the entries that would be acted on, by target
	// (a resolve sends nothing: none).
	ByTarget map[string]int `json:"by_target,omitempty"`
	// ByTopic, BySource and ByClass count every matching entry.
	ByTopic  map[string]int `json:"by_topic"`
	BySource map[string]int `json:"by_source"`
	ByClass  map[string]int `json:"by_class"`
	// Ledger counts, for a replay, the keys the ledger already knows.
	Ledger *LedgerCounts `json:"ledger,omitempty"`
	// OldestFailure and NewestFailure span the matching entries' last
	// failures (or first-seen times).
	OldestFailure time.Time `json:"oldest_failure,omitzero"`
	NewestFailure time.Time `json:"newest_failure,omitzero"`
	// Expected is how long the replays would take at the velocity (a
	// spread, or a rate); "" when neither bounds them: as fast as the
	// targets answer, --max-parallel at a time.
	Expected    string  `json:"expected_duration,omitempty"`
	Rate        float64 `json:"rate_per_second,omitempty"`
	MaxParallel int     `json:"max_parallel,omitempty"`
}

// LedgerCounts: keys the ledger (or a probe) has as committed, and keys
// whose last replay's outcome is unknown. Neither is sent again.
type LedgerCounts struct {
	Committed int `json:"committed"`
	Unknown   int `json:"unknown"`
}

// newBlast starts a blast radius; ledger says the operation read the
// ledger (a replay's decisions do; a resolve's do not).
func newBlast(ledger bool) *BlastRadius {
	br := &BlastRadius{ByTopic: map[string]int{}, BySource: map[string]int{}, ByClass: map[string]int{}}
	if ledger {
		br.Ledger = &LedgerCounts{}
	}
	return br
}

// add counts one matching entry in category cat, acted on through target
// ("" when it is not acted on or nothing is sent).
func (br *BlastRadius) add(er *store.EntryRecord, cat, target string) {
	br.ByTopic[er.Entry.Topic]++
	br.BySource[er.Entry.Source]++
	br.ByClass[string(er.Class)]++
	if target != "" {
		if br.ByTarget == nil {
			br.ByTarget = map[string]int{}
		}
		br.ByTarget[target]++
	}
	if br.Ledger != nil {
		switch cat {
		case WhyCommitted:
			br.Ledger.Committed++
		case WhyUnknown:
			br.Ledger.Unknown++
		}
	}
	if t := store.LastFailure(er); !t.IsZero() {
		if br.OldestFailure.IsZero() || t.Before(br.OldestFailure) {
			br.OldestFailure = t
		}
		if t.After(br.NewestFailure) {
			br.NewestFailure = t
		}
	}
}

// velocity fills in the expected duration of n replays.
func (br *BlastRadius) velocity(n int, spread time.Duration, rate float64, par int) {
	br.Rate, br.MaxParallel = rate, par
	switch {
	case n == 0:
		br.Expected = "0s"
	case spread > 0:
		br.Expected = spread.String()
	case rate > 0:
		br.Expected = (time.Duration(math.Ceil(float64(n)/rate)) * time.Second).String()
	}
}

// targetOf names the route a replay of er would take ("" when none).
func (b *Bulk) targetOf(er *store.EntryRecord) string {
	if b.Reconciler.Router == nil {
		return ""
	}
	route, ok := b.Reconciler.Router.Route(&er.Entry)
	if !ok {
		return ""
	}
	if route.Name == "" {
		return "(unnamed)"
	}
	return route.Name
}

// Describe is the blast radius in one line per part, for the CLI.
func (br *BlastRadius) Describe() []string {
	out := []string{}
	if len(br.ByTarget) > 0 {
		out = append(out, "targets:  "+countList(br.ByTarget))
	}
	out = append(out, "topics:   "+countList(br.ByTopic), "sources:  "+countList(br.BySource), "classes:  "+countList(br.ByClass))
	if br.Ledger != nil {
		out = append(out, fmt.Sprintf("ledger:   %d key(s) already committed, %d with an unknown outcome (neither is sent)", br.Ledger.Committed, br.Ledger.Unknown))
	}
	if !br.OldestFailure.IsZero() {
		out = append(out, "failures: "+br.OldestFailure.UTC().Format(time.RFC3339)+" to "+br.NewestFailure.UTC().Format(time.RFC3339))
	}
	switch {
	case br.Expected != "":
		out = append(out, "duration: about "+br.Expected+velocityNote(br))
	case len(br.ByTarget) > 0:
		out = append(out, fmt.Sprintf("duration: no --rate or --spread: as fast as the targets answer, %d at a time", max(br.MaxParallel, 1)))
	}
	return out
}

func velocityNote(br *BlastRadius) string {
	if br.Rate > 0 {
		return fmt.Sprintf(" at --rate %g/s", br.Rate)
	}
	return ""
}

// countList writes "a 3, b 1", largest first.
func countList(m map[string]int) string {
	type kv struct {
		k string
		n int
	}
	var l []kv
	for k, n := range m {
		l = append(l, kv{k, n})
	}
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && (l[j].n > l[j-1].n || l[j].n == l[j-1].n && l[j].k < l[j-1].k); j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
	s := ""
	for i, e := range l {
		if i > 0 {
			s += ", "
		}
		k := e.k
		if k == "" {
			k = "(none)"
		}
		s += fmt.Sprintf("%s %d", k, e.n)
	}
	if s == "" {
		return "none"
	}
	return s
}
