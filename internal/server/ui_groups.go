package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

// The console's failure groups: the overview's main table (the largest
// open groups, each with its actions) and the Groups page (every group).
// Actions are the same services as the CLI's and the API's: a replay of
// a group is the bulk page's preview == execution with the group as its
// filter; ack, hold, release and resolve change the lifecycle with an
// audit record.

// overviewGroups is how many groups the overview shows.
const overviewGroups = 10

// groupRow is one group as the tables show it.
type groupRow struct {
	store.GroupSummary
	Held     bool
	HeldNote string
	Spark    string
}

func groupRows(gs []store.GroupSummary) []groupRow {
	out := make([]groupRow, 0, len(gs))
	for _, g := range gs {
		r := groupRow{GroupSummary: g, Held: g.State == store.GroupHeld}
		if lc := g.Lifecycle; r.Held && lc != nil {
			r.HeldNote = lc.Reason
			if !lc.Until.IsZero() {
				r.HeldNote += " (until " + lc.Until.UTC().Format("2006-01-02 15:04Z") + ")"
			}
		}
		var b strings.Builder
		bars := []rune("▁▂▃▄▅▆▇█")
		var top int64
		for _, n := range g.Hourly {
			top = max(top, n)
		}
		for _, n := range g.Hourly {
			if n == 0 || top == 0 {
				b.WriteRune('·')
				continue
			}
			b.WriteRune(bars[int(n*int64(len(bars)-1)/top)])
		}
		r.Spark = b.String()
		out = append(out, r)
	}
	return out
}

// groupsData reads the first limit groups (0: all).
func (u *ui) groupsData(ctx context.Context, limit int) ([]groupRow, error) {
	gs, err := u.s.groups("").List(ctx, limit)
	return groupRows(gs), err
}

// heldGroups counts the groups held now, from their lifecycle records.
func (u *ui) heldGroups(ctx context.Context) (int, error) {
	g := u.s.groups("")
	now, n := u.s.cfg.Now(), 0
	err := g.Store.GroupStates(ctx, func(st *store.GroupState) error {
		if st.HoldActive(now) {
			n++
		}
		return nil
	})
	return n, err
}

func (u *ui) groupsPage(w http.ResponseWriter, r *http.Request, tok Token) {
	rows, err := u.groupsData(r.Context(), 0)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	u.render(w, r, http.StatusOK, "groups", tok, map[string]any{"Title": "Failure groups", "Groups": rows,
		"CanOperate": tok.can(permOperate), "Flash": r.URL.Query().Get("flash")})
}

// groupAct applies one action from the console and says how it went.
func (u *ui) groupAct(w http.ResponseWriter, r *http.Request, tok Token) {
	id, verb := r.PathValue("id"), r.PathValue("verb")
	g := u.s.groups(tok.User)
	back := r.PostFormValue("back")
	if back != "/" {
		back = "/groups"
	}
	done := func(flash string) {
		http.Redirect(w, r, back+"?flash="+url.QueryEscape(flash), http.StatusSeeOther)
	}
	ctx := r.Context()
	var st *store.GroupState
	var err error
	switch verb {
	case "ack":
		st, err = g.Ack(ctx, id, r.PostFormValue("note"))
	case "hold":
		var until time.Time
		if v := strings.TrimSpace(r.PostFormValue("until")); v != "" {
			if d, derr := time.ParseDuration(v); derr == nil && d > 0 {
				until = u.s.cfg.Now().Add(d)
			} else if until, err = time.Parse(time.RFC3339, v); err != nil {
				done("not held: until: want a duration (4h) or a time (2026-11-27T18:00:00Z)")
				return
			}
		}
		st, err = g.Hold(ctx, id, r.PostFormValue("reason"), until)
	case "release":
		st, err = g.Release(ctx, id, r.PostFormValue("reason"))
	case "resolve":
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		if reason == "" {
			done("not resolved: a resolve needs a reason")
			return
		}
		_, run, berr := u.s.StartBulk(ctx, &BulkRequest{Filter: replay.BulkFilter{Groups: []string{id}}, Reason: reason}, tok.User, true, false, "ui")
		if berr != nil {
			done("not resolved: " + berr.Error())
			return
		}
		http.Redirect(w, r, "/runs/"+url.PathEscape(run.ID), http.StatusSeeOther)
		return
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		done("group " + id + " unchanged: " + err.Error())
		return
	}
	done("group " + id + " " + st.State + " by " + tok.User)
}

// canaryOfferOver: a bulk replay of more entries than this is offered
// behind a canary of 5% by default on the bulk page (issue 31).
const canaryOfferOver = replay.DefaultConfirmOver

// canaryForm reads the bulk page's canary fields (nil: none asked).
func canaryForm(get func(string) string) (*replay.Canary, error) {
	v := strings.TrimSpace(get("canary"))
	if v == "" {
		return nil, nil
	}
	c, err := replay.ParseCanary(v)
	if err != nil {
		return nil, err
	}
	if a := strings.TrimSpace(get("abort_over")); a != "" {
		if c.AbortOver, err = replay.ParseRate(a); err != nil {
			return nil, err
		}
	}
	c.Watch = replay.Duration{Duration: replay.DefaultCanaryWatch}
	if w := strings.TrimSpace(get("canary_watch")); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%w: canary watch %q: want a duration such as 30s", replay.ErrBadFilter, w)
		}
		c.Watch.Duration = d
	}
	return &c, nil
}
