package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Entry list page sizes.
const (
	defaultPageSize = 50
	maxPageSize     = 500
	// previewShown caps the entries a bulk preview lists by ref (the
	// counts cover all of them).
	previewShown = 200
)

// entryQuery is the entries page's search and filters, as the URL holds
// them: a filtered list is a link anyone can share.
type entryQuery struct {
	Q, State, Class, Action, Source, Topic, Label, Age string
	// Sort: "" (by entry ref), "oldest" or "newest" (by last failure).
	Sort       string
	Page, Size int
}

// entryQueryFields are the filter fields carried from the list to the
// preview and the confirmation.
var entryQueryFields = []string{"q", "state", "class", "action", "source", "topic", "label", "age"}

func parseEntryQuery(get func(string) string) entryQuery {
	q := entryQuery{Q: strings.TrimSpace(get("q")), State: get("state"), Class: get("class"), Action: get("action"),
		Source: strings.TrimSpace(get("source")), Topic: strings.TrimSpace(get("topic")),
		Label: strings.TrimSpace(get("label")), Age: strings.TrimSpace(get("age"))}
	if s := get("sort"); s == "oldest" || s == "newest" {
		q.Sort = s
	}
	q.Page, _ = strconv.Atoi(get("page"))
	if q.Page < 1 {
		q.Page = 1
	}
	q.Size, _ = strconv.Atoi(get("size"))
	if q.Size < 1 {
		q.Size = defaultPageSize
	}
	q.Size = min(q.Size, maxPageSize)
	return q
}

// values is the query without paging (the filter).
func (q entryQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"q": q.Q, "state": q.State, "class": q.Class, "action": q.Action,
		"source": q.Source, "topic": q.Topic, "label": q.Label, "age": q.Age} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// link is the list URL for this filter at page p.
func (q entryQuery) link(p int) string {
	v := q.values()
	if p > 1 {
		v.Set("page", strconv.Itoa(p))
	}
	if q.Size != defaultPageSize {
		v.Set("size", strconv.Itoa(q.Size))
	}
	if q.Sort != "" {
		v.Set("sort", q.Sort)
	}
	if len(v) == 0 {
		return "/entries"
	}
	return "/entries?" + v.Encode()
}

// filter turns the query into the CLI's bulk filter; an empty query means
// every entry (All), which the list shows and a bulk action previews as
// such.
func (q entryQuery) filter() (replay.BulkFilter, error) {
	split := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	f := replay.BulkFilter{Classes: split(q.Class), Actions: split(q.Action), Sources: split(q.Source),
		Topics: split(q.Topic), Text: q.Q}
	if q.State == "open" {
		f.States = openStates
	} else {
		f.States = split(q.State)
	}
	if q.Label != "" {
		k, v, ok := strings.Cut(q.Label, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return f, fmt.Errorf("label filter %q: want key=value", q.Label)
		}
		f.Labels = map[string]string{strings.TrimSpace(k): strings.TrimSpace(v)}
	}
	if q.Age != "" {
		d, err := time.ParseDuration(q.Age)
		if err != nil {
			return f, fmt.Errorf("age %q: want a duration such as 30m, 2h or 72h", q.Age)
		}
		f.OlderThan.Duration = d
	}
	if q.values().Encode() == "" {
		f.All = true
	}
	return f, f.Compile()
}

// entryPage is the one place the console lists entries: one page of the
// entries matching f, in store (ref) order or by last failure (sort
// "oldest" or "newest"), with the total. It reads the store's indexes
// (cursor pages in ref order, the last-failure index sorted; several topic
// globs are a union of topic ranges, an age a range of the last-failure
// index; the total from the counters); it scans only for what no index
// holds (reasons, ids, "newer than").
func entryPage(ctx context.Context, s Store, f *replay.BulkFilter, now time.Time, sortBy string, page, size int) (*replay.Page, error) {
	if sf, ok := storeFilter(f, now); ok {
		return indexedPage(ctx, s, sf, sortBy, page, size)
	}
	return scanPage(ctx, s, f, now, sortBy, page, size)
}

// scanPage is entryPage for a filter no index holds: it reads every
// entry.
func scanPage(ctx context.Context, s Store, f *replay.BulkFilter, now time.Time, sortBy string, page, size int) (*replay.Page, error) {
	p := &replay.Page{Page: page, Size: size, Items: []*store.EntryRecord{}, TotalExact: true}
	skip := (page - 1) * size
	if sortBy == "" {
		err := s.Entries(ctx, func(r *store.EntryRecord) error {
			if !f.Match(r, now) {
				return nil
			}
			p.Total++
			if p.Total > skip && len(p.Items) < size {
				p.Items = append(p.Items, r)
			}
			return nil
		})
		return p, err
	}
	// Sorted: keep only the first skip+size in that order while scanning,
	// in the index's order (newest first is oldest first reversed, ties
	// included).
	keep := skip + size
	var top []*store.EntryRecord
	less := func(a, b *store.EntryRecord) int {
		c := lastFailure(a).Compare(lastFailure(b))
		if c == 0 {
			c = strings.Compare(a.Entry.Ref(), b.Entry.Ref())
		}
		if sortBy == "newest" {
			c = -c
		}
		return c
	}
	trim := func() {
		slices.SortFunc(top, less)
		if len(top) > keep {
			top = top[:keep]
		}
	}
	err := s.Entries(ctx, func(r *store.EntryRecord) error {
		if !f.Match(r, now) {
			return nil
		}
		p.Total++
		top = append(top, r)
		if len(top) >= 2*keep {
			trim()
		}
		return nil
	})
	trim()
	if skip < len(top) {
		p.Items = top[skip:]
	}
	return p, err
}

// indexedPage is page (1-based) of the store's cursor pages: in ref order
// (Page) or by last failure (SortedPage).
func indexedPage(ctx context.Context, s Store, f store.EntryFilter, sortBy string, page, size int) (*replay.Page, error) {
	fetch := func(cursor string) (*store.EntryPage, error) { return s.Page(ctx, f, cursor, size) }
	if sortBy != "" {
		fetch = func(cursor string) (*store.EntryPage, error) {
			return s.SortedPage(ctx, f, sortBy == "newest", cursor, size)
		}
	}
	cursor := ""
	for i := 1; ; i++ {
		ep, err := fetch(cursor)
		if err != nil {
			return nil, err
		}
		p := &replay.Page{Page: page, Size: size, Items: ep.Items, Total: int(ep.Total), TotalExact: ep.TotalExact, Next: ep.Next}
		if i < page && ep.Next == "" { // past the last page
			p.Items, p.Next = []*store.EntryRecord{}, ""
			return p, nil
		}
		if i == page {
			// A total from the counters with a residual filter is an
			// upper bound; on the last page the exact count is known.
			if !p.TotalExact && p.Next == "" {
				p.Total, p.TotalExact = (page-1)*size+len(p.Items), true
			}
			return p, nil
		}
		cursor = ep.Next
	}
}

// storeFilter is f as the store's index filter, when the indexes can
// answer it exactly (reasons, ids, "newer than" and an empty label value,
// which the bulk filter lets an absent label pass, they cannot).
func storeFilter(f *replay.BulkFilter, now time.Time) (store.EntryFilter, bool) {
	if len(f.Reasons) > 0 || len(f.IDs) > 0 || f.NewerThan.Duration != 0 {
		return store.EntryFilter{}, false
	}
	for _, v := range f.Labels {
		if v == "" {
			return store.EntryFilter{}, false
		}
	}
	sf := store.EntryFilter{States: f.States, Classes: f.Classes, Actions: f.Actions, Sources: f.Sources,
		Topics: f.Topics, Labels: f.Labels, Q: f.Text}
	if f.OlderThan.Duration > 0 {
		sf.LastFailedBy = now.Add(-f.OlderThan.Duration)
	}
	return sf, true
}

// lastFailure is when an entry last failed (or was first seen).
func lastFailure(r *store.EntryRecord) time.Time { return store.LastFailure(r) }

func (u *ui) entriesPage(w http.ResponseWriter, r *http.Request, tok Token) {
	q := parseEntryQuery(r.URL.Query().Get)
	data := map[string]any{"Q": q, "Title": "Entries", "Flash": r.URL.Query().Get("flash"),
		"CanOperate": tok.can(permOperate), "Classes": triage.Classes, "Actions": triage.RuleActions,
		"States": store.Statuses, "Fields": q.values()}
	f, err := q.filter()
	if err != nil {
		data["Error"] = err.Error()
		u.render(w, r, http.StatusBadRequest, "entries", tok, data)
		return
	}
	p, err := entryPage(r.Context(), u.s.cfg.Store, &f, u.s.cfg.Now(), q.Sort, q.Page, q.Size)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	pages := max(1, (p.Total+q.Size-1)/q.Size)
	data["P"], data["Pages"] = p, pages
	if q.Page > 1 {
		data["Prev"] = q.link(q.Page - 1)
	}
	// An inexact total (a search or label filter on the indexes) is an
	// upper bound: a next page exists when the listing has a cursor.
	if q.Page < pages && (p.TotalExact || p.Next != "") {
		data["Next"] = q.link(q.Page + 1)
	}
	u.render(w, r, http.StatusOK, "entries", tok, data)
}

// bulkOps are the actions the entries page offers; each maps to the
// CLI's command of the same name.
var bulkOps = map[string]string{"replay": "Replay", "resolve": "Resolve", "release": "Release"}

// entryAction is a bulk action as the list's form sends it: the filter,
// the scope ("selected" ids, or every entry "matching" the filter), the
// operation and, to execute, a reason.
type entryAction struct {
	Query  entryQuery
	Op     string
	Scope  string
	IDs    []string
	Reason string
	Filter replay.BulkFilter
}

func parseEntryAction(r *http.Request) (*entryAction, error) {
	if err := r.ParseForm(); err != nil {
		return &entryAction{}, err
	}
	a := &entryAction{Query: parseEntryQuery(r.Form.Get), Op: r.Form.Get("op"), Scope: r.Form.Get("scope"),
		IDs: r.Form["id"], Reason: strings.TrimSpace(r.Form.Get("reason"))}
	if _, ok := bulkOps[a.Op]; !ok {
		return a, fmt.Errorf("unknown action %q: replay, resolve or release", a.Op)
	}
	if a.Scope == "matching" {
		f, err := a.Query.filter()
		a.Filter = f
		return a, err
	}
	a.Scope = "selected"
	if len(a.IDs) == 0 {
		return a, errors.New("no entries selected: tick some, or choose \"all matching the filter\"")
	}
	a.Filter = replay.BulkFilter{IDs: a.IDs}
	return a, a.Filter.Compile()
}

// hidden is the action's form state, for the confirmation form.
func (a *entryAction) hidden() url.Values {
	v := a.Query.values()
	v.Set("op", a.Op)
	v.Set("scope", a.Scope)
	if a.Scope == "selected" {
		v["id"] = a.IDs
	}
	return v
}

// entryActPreview shows what the action would do, entry by entry, before
// anything changes (GET: no state change, no CSRF token needed).
func (u *ui) entryActPreview(w http.ResponseWriter, r *http.Request, tok Token) {
	a, err := parseEntryAction(r)
	data := map[string]any{"Title": "Confirm", "CanOperate": tok.can(permOperate)}
	if err != nil {
		data["Error"] = err.Error()
		data["Back"] = a.Query.link(1)
		u.render(w, r, http.StatusBadRequest, "act", tok, data)
		return
	}
	rep, err := u.previewAction(r.Context(), a, tok.User)
	if err != nil {
		data["Error"] = err.Error()
	}
	data["A"], data["OpName"], data["Rep"], data["Hidden"], data["Back"] = a, bulkOps[a.Op], rep, a.hidden(), a.Query.link(1)
	if rep != nil && len(rep.Items) > previewShown {
		data["Shown"] = rep.Items[:previewShown]
	} else if rep != nil {
		data["Shown"] = rep.Items
	}
	u.render(w, r, http.StatusOK, "act", tok, data)
}

// previewAction: replay and resolve preview through the CLI's bulk code;
// release, which the CLI does per entry, lists the entries it would
// release.
func (u *ui) previewAction(ctx context.Context, a *entryAction, actor string) (*replay.BulkReport, error) {
	if a.Op == "release" {
		return u.releasePlan(ctx, a)
	}
	rep, _, err := u.s.StartBulk(ctx, &BulkRequest{Filter: a.Filter, Max: replay.DefaultBulkMax}, actor, a.Op == "resolve", true, "ui")
	return rep, err
}

func (u *ui) releasePlan(ctx context.Context, a *entryAction) (*replay.BulkReport, error) {
	rep := &replay.BulkReport{Op: "release", Filter: a.Filter, Preview: true, Why: map[string]int{}}
	now := u.s.cfg.Now()
	err := u.s.cfg.Store.Entries(ctx, func(er *store.EntryRecord) error {
		if !a.Filter.Match(er, now) {
			return nil
		}
		rep.Matched++
		cat := "release"
		if !replay.Releasable(er) {
			cat = "not held (" + er.Status + ")"
			rep.WouldNot++
			rep.Why[cat]++
		} else {
			rep.Would++
		}
		rep.Items = append(rep.Items, replay.BulkItem{Ref: er.Entry.Ref(), Category: cat})
		return nil
	})
	return rep, err
}

// entryActExecute performs a confirmed action as a run, through the same
// bulk path (and audit records) as `replayctl dlq replay|resolve`, and
// sends the browser to the run's page.
func (u *ui) entryActExecute(w http.ResponseWriter, r *http.Request, tok Token) {
	a, err := parseEntryAction(r)
	if err == nil && (a.Op == "resolve" || a.Op == "release") && a.Reason == "" {
		err = fmt.Errorf("a reason is required to %s", a.Op)
	}
	if err != nil {
		http.Redirect(w, r, a.Query.link(1)+flashSep(a.Query.link(1))+"flash="+url.QueryEscape("not done: "+err.Error()), http.StatusSeeOther)
		return
	}
	var run *Run
	switch a.Op {
	case "release":
		run, err = u.startRelease(a, tok.User)
	default:
		_, run, err = u.s.StartBulk(r.Context(), &BulkRequest{Filter: a.Filter, Max: replay.DefaultBulkMax, Reason: a.Reason},
			tok.User, a.Op == "resolve", false, "ui")
	}
	if err != nil {
		back := a.Query.link(1)
		http.Redirect(w, r, back+flashSep(back)+"flash="+url.QueryEscape("not done: "+err.Error()), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(run.ID), http.StatusSeeOther)
}

func flashSep(link string) string {
	if strings.Contains(link, "?") {
		return "&"
	}
	return "?"
}

// startRelease releases every matching held entry as a run: each release
// is replay.Release, the CLI's `dlq release`, with its own audit record.
func (u *ui) startRelease(a *entryAction, actor string) (*Run, error) {
	f := a.Filter
	return u.s.runs.startWork("ui", actor, "bulk-release", func(ctx context.Context, run *Run) error {
		plan, err := u.releasePlan(ctx, &entryAction{Filter: f})
		if err != nil {
			return err
		}
		rep := &replay.BulkReport{Op: "release", Filter: f, Matched: plan.Matched, Why: map[string]int{}}
		for _, it := range plan.Items {
			if ctx.Err() != nil {
				rep.Stopped = "interrupted: run it again to release the rest"
				break
			}
			if it.Category != "release" {
				rep.WouldNot++
				rep.Why[it.Category]++
				continue
			}
			if _, err := replay.Release(ctx, u.s.cfg.Store, it.Ref, actor, a.Reason); err != nil {
				if !errors.Is(err, replay.ErrState) {
					return err
				}
				it.Category = "not held any more"
				rep.WouldNot++
				rep.Why[it.Category]++
			} else {
				rep.Would++
			}
			rep.Items = append(rep.Items, it)
			rep.Done++
			if rep.Done%max(1, rep.Matched/100) == 0 {
				u.s.publishBulk(run, rep)
			}
		}
		u.s.publishBulk(run, rep)
		return nil
	})
}
