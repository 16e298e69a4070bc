package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

// approvalsPerPage keeps the queue page small: the whole queue at 5k
// entries was 1.4 MB of HTML.
const approvalsPerPage = 20

// approvalCard is one request as the queue shows it, with what the
// approver is asked to approve: the entry, its payload, the reasons.
type approvalCard struct {
	approval.View
	Entry      *store.EntryRecord
	Payload    string
	PayloadCut bool
	Expired    bool
	// Previous is the entry's request before this one, if any, and
	// Changed what differs since (what the approver should look at).
	Previous *approval.View
	Changed  []string
	// Decidable: the viewer may approve or reject it (mayDecide).
	Decidable bool
}

// decidableGroups are the approver groups tok's user belongs to, by
// approvers.yaml or by a trusted proxy's groups.
func (u *ui) decidableGroups(tok Token) []string {
	var out []string
	for _, g := range u.approverGroups() {
		if u.s.cfg.Approvers.Member(g, tok.User) {
			out = append(out, g)
		}
	}
	for _, g := range tok.Groups {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// mayDecide says whether the console offers approve and reject on a: the
// approver role, a member of its group, not the person who asked (four
// eyes), and still pending. The server checks all of it again on submit.
func (u *ui) mayDecide(tok Token, a *store.Approval) bool {
	if !tok.can(permApprove) || a.State != store.ApprovalPending {
		return false
	}
	if !u.s.cfg.Approvers.Member(a.ApproverGroup, tok.User) && !slices.Contains(tok.Groups, a.ApproverGroup) {
		return false
	}
	if approval.SameIdentity(a.RequestedBy, tok.User) {
		return false
	}
	return !slices.ContainsFunc(a.RerequestedBy, func(r string) bool { return approval.SameIdentity(r, tok.User) })
}

// changedSince lists what differs between a previous request's decision
// and this one's: what is new for the approver.
func changedSince(prev, cur *store.Approval) []string {
	p, c := &prev.Decision, &cur.Decision
	var out []string
	diff := func(what, a, b string) {
		if a != b {
			out = append(out, what+": "+a+" → "+b)
		}
	}
	diff("payload", short(p.PayloadHash), short(c.PayloadHash))
	diff("class", string(p.Class), string(c.Class))
	diff("rule", p.Rule, c.Rule)
	diff("policy said", string(p.PolicyAction), string(c.PolicyAction))
	diff("policy snapshot", short(p.PolicySnapshot), short(c.PolicySnapshot))
	diff("ledger", p.Ledger.State, c.Ledger.State)
	if p.Ledger.Replays != c.Ledger.Replays {
		out = append(out, fmt.Sprintf("replays so far: %d → %d", p.Ledger.Replays, c.Ledger.Replays))
	}
	diff("approver group", prev.ApproverGroup, cur.ApproverGroup)
	if strings.Join(p.Reasons, "\x00") != strings.Join(c.Reasons, "\x00") {
		out = append(out, "reasons changed")
	}
	if len(out) == 0 && prev.Evidence != cur.Evidence {
		out = append(out, "evidence hash only")
	}
	return out
}

// short cuts a "sha256:..." id for display.
func short(s string) string {
	if len(s) > 19 {
		return s[:19] + "…"
	}
	return s
}

// approvalQueue is the one place the console lists approval requests:
// filtered by state, group and minimum age, newest requests last (oldest
// first: they have waited longest), one page. The pending queue (what
// approvers work from) reads the store's index of open requests and each
// shown request's entry history; other states read the index by state
// (expired: the stored expired and the pending past their expiry).
func approvalQueue(ctx context.Context, svc *approval.Service, s Store, state, group string, older time.Duration, now time.Time, page int) ([]approvalCard, int, error) {
	return approvalQueueMatch(ctx, svc, s, state, func(a *store.Approval) bool { return group == "" || a.ApproverGroup == group }, older, now, page)
}

// approvalQueueMatch is approvalQueue keeping the requests match takes
// (group, the groups a user decides, an id, an entry).
func approvalQueueMatch(ctx context.Context, svc *approval.Service, s Store, state string, match func(*store.Approval) bool, older time.Duration, now time.Time, page int) ([]approvalCard, int, error) {
	if strings.EqualFold(state, store.ApprovalPending) {
		return pendingQueue(ctx, svc, s, match, older, now, page)
	}
	return stateQueue(ctx, s, state, match, older, now, page)
}

// stateQueue lists the requests in state ("": every state) from the
// index by state, each with its state as a reader sees it at now.
func stateQueue(ctx context.Context, s Store, state string, match func(*store.Approval) bool, older time.Duration, now time.Time, page int) ([]approvalCard, int, error) {
	var stored []string
	switch {
	case state == "":
	case strings.EqualFold(state, store.ApprovalExpired):
		stored = []string{store.ApprovalExpired, store.ApprovalPending}
	default:
		stored = []string{state}
	}
	var list []approval.View
	err := s.ApprovalsByState(ctx, stored, func(a *store.Approval) error {
		v := approval.View{Approval: *a}
		if a.State == store.ApprovalPending && !a.ExpiresAt.IsZero() && now.After(a.ExpiresAt) {
			v.State = store.ApprovalExpired // as approval.Service shows it
		}
		if match(&v.Approval) && (state == "" || strings.EqualFold(v.State, state)) {
			list = append(list, v)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return approvalCards(ctx, s, list, func(ref string) ([]approval.View, *store.EntryRecord, error) {
		if ref == "" {
			return nil, nil, nil // a plan's request: no entry (the page answered 500 for it)
		}
		return entryApprovals(ctx, s, ref)
	}, older, now, page)
}

// pendingQueue is the pending queue from the store's index of open
// requests; a shown request's earlier ones are found through the
// approval ids its entry's audit history names.
func pendingQueue(ctx context.Context, svc *approval.Service, s Store, match func(*store.Approval) bool, older time.Duration, now time.Time, page int) ([]approvalCard, int, error) {
	var list []approval.View
	err := pendingApprovals(ctx, s, now, func(a *store.Approval) {
		if match(a) {
			list = append(list, approval.View{Approval: *a})
		}
	})
	if err != nil {
		return nil, 0, err
	}
	earlier := func(ref string) ([]approval.View, *store.EntryRecord, error) {
		if ref == "" {
			return nil, nil, nil // a plan's request: no entry (replay/plan_approval.go)
		}
		return entryApprovals(ctx, s, ref)
	}
	return approvalCards(ctx, s, list, earlier, older, now, page)
}

// entryApprovals reads the approval requests an entry's audit history
// names (its approval records carry the request id in their detail), and
// the entry, which the card shows.
func entryApprovals(ctx context.Context, s Store, ref string) ([]approval.View, *store.EntryRecord, error) {
	d, err := replay.Show(ctx, s, ref)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	var out []approval.View
	err = s.View(ctx, func(tx store.Tx) error {
		for _, rec := range d.Decisions {
			if rec.Kind != audit.KindApproval || len(rec.Detail) == 0 {
				continue
			}
			var det struct {
				ID       string `json:"approval_id"`
				Replaces string `json:"replaces"`
			}
			if json.Unmarshal(rec.Detail, &det) != nil {
				continue
			}
			for _, id := range []string{det.ID, det.Replaces} {
				if id == "" || seen[id] {
					continue
				}
				seen[id] = true
				a, err := tx.Approval(id)
				if err != nil {
					return err
				}
				if a != nil {
					out = append(out, approval.View{Approval: *a})
				}
			}
		}
		return nil
	})
	return out, d.Entry, err
}

// approvalCards sorts list oldest first, keeps those older than older,
// and builds one page of cards; earlier gives an entry's requests, to say
// what changed since the last one, and the entry when it read it.
func approvalCards(ctx context.Context, s Store, list []approval.View, earlier func(ref string) ([]approval.View, *store.EntryRecord, error), older time.Duration, now time.Time, page int) ([]approvalCard, int, error) {
	// Oldest first: they have waited longest.
	slices.SortStableFunc(list, func(a, b approval.View) int {
		if c := a.RequestedAt.Compare(b.RequestedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	kept := list[:0]
	for _, v := range list {
		if older > 0 && now.Sub(v.RequestedAt) < older {
			continue
		}
		kept = append(kept, v)
	}
	total := len(kept)
	from := min((page-1)*approvalsPerPage, total)
	to := min(from+approvalsPerPage, total)
	cards := make([]approvalCard, 0, to-from)
	for _, v := range kept[from:to] {
		c := approvalCard{View: v, Expired: v.State == store.ApprovalExpired}
		others, er, err := earlier(v.EntryRef)
		if err != nil {
			return nil, 0, err
		}
		for _, o := range others {
			if v.EntryRef == "" {
				break // a plan's request (replay/plan_approval.go): no entry, no history
			}
			if o.ID != v.ID && o.RequestedAt.Before(v.RequestedAt) && (c.Previous == nil || o.RequestedAt.After(c.Previous.RequestedAt)) {
				prev := o
				c.Previous = &prev
			}
		}
		if c.Previous != nil {
			c.Changed = changedSince(&c.Previous.Approval, &v.Approval)
		}
		c.View.Age = humanAge(now.Sub(v.RequestedAt))
		c.Entry = er
		if c.Entry == nil {
			err = s.View(ctx, func(tx store.Tx) error {
				er, err := tx.Entry(v.EntryRef)
				c.Entry = er
				return err
			})
			if err != nil {
				return nil, 0, err
			}
		}
		if c.Entry != nil {
			c.Payload, c.PayloadCut = payloadPreview(c.Entry.Entry.Payload, cardPayloadCap)
		}
		cards = append(cards, c)
	}
	return cards, total, nil
}

func (u *ui) approvalsPage(w http.ResponseWriter, r *http.Request, tok Token) {
	q := r.URL.Query()
	state := q.Get("state")
	id, entryRef := strings.TrimSpace(q.Get("id")), strings.TrimSpace(q.Get("entry"))
	switch {
	case state == "" && (id != "" || entryRef != ""):
		state = "all" // a request looked up by id or entry is found in any state
	case state == "":
		state = store.ApprovalPending
	}
	if state == "all" {
		state = ""
	}
	data := map[string]any{"Title": "Approvals", "State": state, "StateParam": q.Get("state"), "Group": q.Get("group"),
		"Older": q.Get("older"), "CanDecide": tok.can(permApprove), "CanAsk": tok.can(permOperate) || tok.can(permApprove),
		"Flash": q.Get("flash"), "FlashErr": q.Get("err") != "", "Groups": u.approverGroups(), "ID": id, "EntryRef": entryRef}
	// By default an approver sees the groups they may decide; "mine=all"
	// (the toggle) shows every group's requests, as a lookup does.
	mine := u.decidableGroups(tok)
	onlyMine := tok.can(permApprove) && q.Get("mine") != "all" && q.Get("group") == "" && id == "" && entryRef == ""
	data["OnlyMine"], data["MyGroups"] = onlyMine, mine
	group := q.Get("group")
	match := func(a *store.Approval) bool {
		switch {
		case group != "" && a.ApproverGroup != group:
			return false
		case id != "" && a.ID != id:
			return false
		case entryRef != "" && a.EntryRef != entryRef && a.EntryID != entryRef:
			return false
		case onlyMine && !slices.Contains(mine, a.ApproverGroup):
			return false
		}
		return true
	}
	var older time.Duration
	if v := q.Get("older"); v != "" {
		var err error
		if older, err = time.ParseDuration(v); err != nil {
			data["Error"] = "waiting longer than " + strconv.Quote(v) + ": want a duration such as 30m or 2h"
		}
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	cards, total, err := approvalQueueMatch(r.Context(), u.s.approvals(), u.s.cfg.Store, state, match, older, u.s.cfg.Now(), page)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	data["Cards"], data["Total"], data["PageN"] = cards, total, page
	// The "decide the ticked" bar only where there is something to tick:
	// the server refuses deciding a stale or expired request, so that view
	// offers Re-request alone.
	tickable := false
	for i := range cards {
		cards[i].Decidable = u.mayDecide(tok, &cards[i].Approval)
		tickable = tickable || cards[i].Decidable
	}
	data["Tickable"] = tickable
	link := func(p int) string {
		v := url.Values{}
		for _, k := range []string{"state", "group", "older", "id", "entry", "mine"} {
			if q.Get(k) != "" {
				v.Set(k, q.Get(k))
			}
		}
		v.Set("page", strconv.Itoa(p))
		return "/approvals?" + v.Encode()
	}
	if page > 1 {
		data["Prev"] = link(page - 1)
	}
	if page*approvalsPerPage < total {
		data["Next"] = link(page + 1)
	}
	u.render(w, r, http.StatusOK, "approvals", tok, data)
}

func (u *ui) approverGroups() []string {
	var out []string
	for g := range u.s.cfg.Approvers.Groups {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// decisionFlash says what happened to one request, or why not.
func decisionFlash(a *store.Approval, err error, user string) (string, error) {
	switch {
	case err == nil:
		return a.ID + " " + a.State + " by " + user, nil
	case errors.Is(err, approval.ErrForbidden):
		// The refusal names the server's approvers.yaml path: the console
		// says who may decide instead (issue 30).
		group := ""
		if a != nil {
			group = " " + strconv.Quote(a.ApproverGroup)
		}
		return "not done: " + user + " is not an approver of group" + group + "; ask an administrator to add you to it", nil
	case errors.Is(err, errBadRequest), errors.Is(err, approval.ErrSelfApproval),
		errors.Is(err, approval.ErrDecided), errors.Is(err, approval.ErrStale), errors.Is(err, approval.ErrExpired), errors.Is(err, approval.ErrNotFound):
		return "not done: " + err.Error(), nil
	}
	// Other errors (the reject-needs-a-reason check among them) are the
	// person's to fix, but a store failure is the server's.
	if strings.Contains(err.Error(), "reason is required") {
		return "not done: " + err.Error(), nil
	}
	return "", err
}

func (u *ui) decide(w http.ResponseWriter, r *http.Request, tok Token) {
	id, decision := r.PathValue("id"), r.PathValue("decision")
	if decision != "approve" && decision != "reject" {
		http.NotFound(w, r)
		return
	}
	a, err := u.s.DecideApproval(r, id, tok.User, decision == "approve", r.PostFormValue("reason"))
	flash, err := decisionFlash(a, err, tok.User)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	http.Redirect(w, r, flashURL(r.PostFormValue("back"), flash), http.StatusSeeOther)
}

// flashURL is where a decision returns: back to the entry page it was
// made on (a local /entries/ path only), else the approvals page; a
// refusal carries err=1 so it is shown as an error.
func flashURL(back, flash string) string {
	target := "/approvals"
	if strings.HasPrefix(back, "/entries/") && !strings.ContainsAny(back, "?#\\") && !strings.HasPrefix(back, "//") {
		target = back
	}
	q := url.Values{"flash": {flash}}
	if strings.HasPrefix(flash, "not done") {
		q.Set("err", "1")
	}
	return target + "?" + q.Encode()
}

// decideMany approves or rejects every ticked request with one reason:
// each is still its own decision (four-eyes, group and staleness checked
// per request), and the flash says how each went.
func (u *ui) decideMany(w http.ResponseWriter, r *http.Request, tok Token) {
	ids := r.PostForm["id"]
	decision := r.PostFormValue("decision")
	if decision != "approve" && decision != "reject" {
		http.Error(w, "decision must be approve or reject", http.StatusBadRequest)
		return
	}
	if len(ids) == 0 {
		http.Redirect(w, r, "/approvals?flash="+url.QueryEscape("nothing ticked"), http.StatusSeeOther)
		return
	}
	var lines []string
	eng := u.s.requestEngine() // compiled once for every ticked request
	for _, id := range ids {
		a, err := u.s.decideApproval(r, eng, id, tok.User, decision == "approve", r.PostFormValue("reason"))
		flash, err := decisionFlash(a, err, tok.User)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if !strings.HasPrefix(flash, "not done") {
			lines = append(lines, flash)
		} else {
			lines = append(lines, id+": "+flash)
		}
	}
	http.Redirect(w, r, "/approvals?flash="+url.QueryEscape(strings.Join(lines, "; ")), http.StatusSeeOther)
}

// rerequest asks again for an expired request (replay.Rerequest, as
// `approvals rerequest` does) or a stale one (rerequestStale).
func (u *ui) rerequest(w http.ResponseWriter, r *http.Request, tok Token) {
	if !tok.can(permOperate) && !tok.can(permApprove) {
		http.Error(w, "your role ("+tok.Role+") may not ask for approvals", http.StatusForbidden)
		return
	}
	id := r.PathValue("id")
	var stale *store.Approval
	if err := u.s.cfg.Store.View(r.Context(), func(tx store.Tx) error {
		a, err := tx.Approval(id)
		if a != nil && a.State == store.ApprovalStale {
			stale = a
		}
		return err
	}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var flash string
	var err error
	if stale != nil {
		var newID string
		if newID, err = u.rerequestStale(r, stale, tok.User); err == nil {
			flash = "asked again as " + newID + " on the entry's current evidence"
		}
	} else {
		var a *store.Approval
		if a, err = replay.Rerequest(r.Context(), u.s.cfg.Store, id, tok.User, u.s.cfg.Now(), u.s.cfg.Approvers.Expiry); err == nil {
			flash = "asked again as " + a.ID + ", open until " + a.ExpiresAt.UTC().Format(time.RFC3339)
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, replay.ErrState), errors.Is(err, replay.ErrNotFound):
		flash = "not done: " + err.Error()
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	http.Redirect(w, r, "/approvals?flash="+url.QueryEscape(flash), http.StatusSeeOther)
}

// rerequestStale asks again for a request whose evidence changed
// (replay.Reconciler.RerequestStale): the entry is decided now and, while
// that decision still asks for an approval, a request is opened on the
// current evidence. Nothing is sent: re-requesting is open to approvers,
// and Replay now (which may dispatch) stays an operator's. It returns the
// new request's id.
func (u *ui) rerequestStale(r *http.Request, a *store.Approval, actor string) (string, error) {
	ctx := r.Context()
	engine, snap, err := u.s.cfg.Engine(ctx)
	if err != nil {
		return "", err
	}
	// The decision recorded names this snapshot: store it, as a run does.
	if err := u.s.cfg.Store.PutSnapshot(ctx, snap.ID, snap); err != nil {
		return "", err
	}
	rc := &replay.Reconciler{Engine: engine, Store: u.s.cfg.Store, Actor: actor,
		ApprovalTTL: u.s.cfg.Approvers.Expiry, Clock: nowClock{now: u.s.cfg.Now}}
	n, err := rc.RerequestStale(ctx, a.ID)
	if err != nil {
		return "", err
	}
	return n.ID, nil
}

// nowClock is the server's injected Now as the runner's Clock (asking
// again never waits, so Sleep is the real one's).
type nowClock struct {
	replay.SystemClock
	now func() time.Time
}

func (c nowClock) Now() time.Time { return c.now() }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
