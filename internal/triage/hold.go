package triage

import (
	"fmt"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

// GroupHold is a person's decision that every entry of a failure group,
// current and future, waits: "hold until the payments fix is deployed".
type GroupHold struct {
	Group  string    `json:"group"`
	Reason string    `json:"reason"`
	Until  time.Time `json:"until,omitzero"`
	By     string    `json:"by,omitempty"`
}

// Holds are the holds in force, by group id. The runner reads them once
// per run and leaves out the expired ones (the decision never reads the
// clock).
type Holds map[string]GroupHold

// applyHold makes an entry of a held group wait for a person: manual
// review, with the hold as its reason. Nothing left to replay (a skip)
// stays a skip.
func (g *Engine) applyHold(e *entry.Entry, d *Decision) {
	if len(g.Holds) == 0 || d.Action == Skip {
		return
	}
	id := g.Rules.GroupOptions().IDOf(e, string(d.Class))
	h, ok := g.Holds[id]
	if !ok {
		return
	}
	h.Group = id
	d.GroupHold = &h
	why := fmt.Sprintf("group %s is held", id)
	if h.By != "" {
		why += " by " + h.By
	}
	why += ": " + h.Reason
	if !h.Until.IsZero() {
		why += " (until " + h.Until.UTC().Format(time.RFC3339) + ")"
	}
	d.escalate(ManualReview, why)
}

// WithHolds returns a copy of the engine deciding with holds.
func (g *Engine) WithHolds(h Holds) *Engine {
	cp := *g
	cp.Holds = h
	return &cp
}
