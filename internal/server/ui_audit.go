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

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

const auditPerPage = 100

// headView is what the audit page says about the chain: the server's one
// incremental verification (audit.Incremental, shared with GET
// /api/audit/verify?incremental=1), so each page load checks only the
// records added since the last verification, then the stored head (and
// its signature with the key). A rewrite of records already verified is
// the full check's to find: `replayctl audit verify` and GET
// /api/audit/verify walk the whole chain.
type headView struct {
	audit.VerifyResult
	Checked int // records verified by this page load
	At      time.Time
}

// verifyHead extends iv's verification to the chain's current end.
func verifyHead(ctx context.Context, iv *audit.Incremental, r audit.Chain, key []byte, now time.Time) (*headView, error) {
	res, err := iv.Verify(ctx, r, key)
	if err != nil {
		return nil, err
	}
	hv := &headView{VerifyResult: *res, At: now}
	if res.From > 0 {
		hv.Checked = max(0, res.Records-int(res.From)+1)
	}
	return hv, nil
}

var errStopVerify = errors.New("stop")

// auditQuery is the audit page's filter.
type auditQuery struct {
	audit.Query
	Until      time.Time
	SinceText  string
	UntilText  string
	Page, Size int
}

const auditTimeLayout = "2006-01-02T15:04"

func parseAuditQuery(q url.Values) (auditQuery, error) {
	aq := auditQuery{Query: audit.Query{Entry: strings.TrimSpace(q.Get("entry")), Actor: strings.TrimSpace(q.Get("actor")),
		Kind: q.Get("kind")}, SinceText: q.Get("since"), UntilText: q.Get("until")}
	aq.Page, _ = strconv.Atoi(q.Get("page"))
	aq.Page = max(aq.Page, 1)
	aq.Size, _ = strconv.Atoi(q.Get("size"))
	if aq.Size < 1 {
		aq.Size = auditPerPage
	}
	aq.Size = min(aq.Size, 500)
	var err error
	if aq.SinceText != "" {
		if aq.Since, err = time.ParseInLocation(auditTimeLayout, aq.SinceText, time.UTC); err != nil {
			return aq, fmt.Errorf("from %q: want YYYY-MM-DDTHH:MM (UTC)", aq.SinceText)
		}
	}
	if aq.UntilText != "" {
		if aq.Until, err = time.ParseInLocation(auditTimeLayout, aq.UntilText, time.UTC); err != nil {
			return aq, fmt.Errorf("until %q: want YYYY-MM-DDTHH:MM (UTC)", aq.UntilText)
		}
	}
	return aq, nil
}

func (aq auditQuery) link(page int) string {
	v := url.Values{}
	for k, s := range map[string]string{"entry": aq.Entry, "actor": aq.Actor, "kind": aq.Kind, "since": aq.SinceText, "until": aq.UntilText} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if aq.Size != auditPerPage {
		v.Set("size", strconv.Itoa(aq.Size))
	}
	if len(v) == 0 {
		return "/audit"
	}
	return "/audit?" + v.Encode()
}

// auditPage is the one place the console lists audit records: newest
// first, one page, with the total matching. Unfiltered it reads only the
// page's seqs back from the head; by actor, kind or time, the seqs from
// the audit indexes and then only the page's records; otherwise the
// records replay.EachAudit reads (an entry's from its index; an action
// alone is in no index: that filter reads the chain).
func auditPage(ctx context.Context, s Store, aq auditQuery) ([]audit.Record, int, error) {
	indexed := aq.Actor != "" || aq.Kind != "" || !aq.Since.IsZero() || !aq.Until.IsZero()
	switch {
	case aq.Query == (audit.Query{}) && aq.Until.IsZero():
		return auditTail(ctx, s, aq.Page, aq.Size)
	case aq.Entry == "" && aq.Action == "" && indexed:
		return auditIndexed(ctx, s, aq)
	}
	each := func(fn func(audit.Record) error) error { return replay.EachAudit(ctx, s, 1, aq.Query, fn) }
	return newestPage(each, aq)
}

// newestPage is page aq.Page of the records each yields (oldest first,
// matching aq.Query), newest first, with the total up to aq.Until.
func newestPage(each func(fn func(audit.Record) error) error, aq auditQuery) ([]audit.Record, int, error) {
	keep := aq.Page * aq.Size
	var recs []audit.Record
	total := 0
	err := each(func(rec audit.Record) error {
		if !aq.Until.IsZero() && rec.Time.After(aq.Until) {
			return nil
		}
		total++
		recs = append(recs, rec)
		if len(recs) > 2*keep { // keep only the newest `keep`
			recs = append(recs[:0], recs[len(recs)-keep:]...)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if len(recs) > keep {
		recs = recs[len(recs)-keep:]
	}
	// recs holds the newest `keep` (or fewer), oldest first; the page is
	// its first Size counted from the newest.
	end := len(recs) - (aq.Page-1)*aq.Size
	if end <= 0 {
		return []audit.Record{}, total, nil
	}
	start := max(0, end-aq.Size)
	page := make([]audit.Record, 0, end-start)
	for i := end - 1; i >= start; i-- {
		page = append(page, recs[i])
	}
	return page, total, nil
}

// auditIndexed is one page of the records the audit indexes select,
// newest first: it reads the page's records alone.
func auditIndexed(ctx context.Context, ai Store, aq auditQuery) ([]audit.Record, int, error) {
	seqs, err := ai.AuditSeqs(ctx, store.AuditFilter{Actor: aq.Actor, Kind: aq.Kind, Since: aq.Since, Until: aq.Until})
	if err != nil {
		return nil, 0, err
	}
	end := len(seqs) - (aq.Page-1)*aq.Size
	if end <= 0 {
		return []audit.Record{}, len(seqs), nil
	}
	want := slices.Clone(seqs[max(0, end-aq.Size):end])
	slices.Reverse(want)
	recs := make([]audit.Record, 0, len(want))
	err = ai.AuditRecords(ctx, want, func(_ uint64, s audit.Sealed, derr error) error {
		if derr != nil {
			return nil // the verification above the list reports it
		}
		if rec, err := s.Open(); err == nil {
			recs = append(recs, rec)
		}
		return nil
	})
	return recs, len(seqs), err
}

// auditTail is page (1-based) of the whole chain, newest first: it reads
// the page's seqs alone, whatever the chain's length.
func auditTail(ctx context.Context, r audit.Reader, page, size int) ([]audit.Record, int, error) {
	head, _, err := r.AuditHead(ctx)
	if err != nil {
		return nil, 0, err
	}
	total := int(head)
	last := total - (page-1)*size
	if last <= 0 {
		return []audit.Record{}, total, nil
	}
	first := max(1, last-size+1)
	recs := make([]audit.Record, 0, last-first+1)
	err = r.AuditRange(ctx, uint64(first), func(seq uint64, s audit.Sealed, derr error) error {
		if seq > uint64(last) {
			return errStopVerify
		}
		if derr != nil {
			return nil // the verification above the list reports it
		}
		if rec, err := s.Open(); err == nil {
			recs = append(recs, rec)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopVerify) {
		return nil, 0, err
	}
	slices.Reverse(recs)
	return recs, total, nil
}

// auditKinds are the record kinds the filter offers.
var auditKinds = []string{audit.KindDecision, audit.KindDispatch, audit.KindOutcome, audit.KindRecovery, audit.KindProbe,
	audit.KindResolve, audit.KindRelease, audit.KindApproval, audit.KindWriteBack, audit.KindBulk}

func (u *ui) auditPage(w http.ResponseWriter, r *http.Request, tok Token) {
	aq, err := parseAuditQuery(r.URL.Query())
	data := map[string]any{"Title": "Audit", "Q": aq, "Kinds": auditKinds}
	if err != nil {
		data["Error"] = err.Error()
		u.render(w, r, http.StatusBadRequest, "audit", tok, data)
		return
	}
	recs, total, err := auditPage(r.Context(), u.s.cfg.Store, aq)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	hv, err := verifyHead(r.Context(), &u.s.verified, u.s.cfg.Store, u.s.cfg.AuditKey, u.s.cfg.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	data["Records"], data["Total"], data["Verify"] = recs, total, hv
	if aq.Page > 1 {
		data["Prev"] = aq.link(aq.Page - 1)
	}
	if aq.Page*aq.Size < total {
		data["Next"] = aq.link(aq.Page + 1)
	}
	u.render(w, r, http.StatusOK, "audit", tok, data)
}
