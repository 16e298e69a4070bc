package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
)

// payloadCap bounds the payload an entry page shows: a 5 MB payload must
// not make a 5 MB page. The API's GET /api/dead-letters/{id} has it all.
const payloadCap = 64 << 10

// entryDetail is the one place the entry page reads an entry: the record,
// its ledger state, its audit story (today a scan of the audit chain; the
// lead points it at a per-entry audit index when the store has one) and
// its approval request.
func entryDetail(ctx context.Context, s Store, id string) (*replay.Detail, *store.Approval, error) {
	d, err := replay.Show(ctx, s, id)
	if err != nil {
		return nil, nil, err
	}
	var apr *store.Approval
	if d.Entry.ApprovalID != "" {
		err = s.View(ctx, func(tx store.Tx) error {
			apr, err = tx.Approval(d.Entry.ApprovalID)
			return err
		})
	}
	return d, apr, err
}

// prettyPayload indents a JSON payload (any other bytes are shown as they
// are) and cuts it at payloadCap; it says how much was cut.
func prettyPayload(raw []byte) (text string, size int, cut bool) {
	size = len(raw)
	var buf bytes.Buffer
	if len(raw) <= 4*payloadCap && json.Indent(&buf, raw, "", "  ") == nil {
		raw = buf.Bytes()
	}
	if len(raw) > payloadCap {
		return strings.ToValidUTF8(string(raw[:payloadCap]), ""), size, true
	}
	return string(raw), size, false
}

func (u *ui) entry(w http.ResponseWriter, r *http.Request, tok Token) {
	d, apr, err := entryDetail(r.Context(), u.s.cfg.Store, r.PathValue("id"))
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, replay.ErrNotFound) || errors.Is(err, replay.ErrAmbiguous) {
			status = http.StatusNotFound
		}
		u.render(w, r, status, "overview", tok, map[string]any{"Error": err.Error()})
		return
	}
	er := d.Entry
	payload, size, cut := prettyPayload(er.Entry.Payload)
	open := false
	switch er.Status {
	case store.StatusPending, store.StatusAwaitingApproval, store.StatusRejected, store.StatusManualReview,
		store.StatusQuarantined, store.StatusUnknown:
		open = true
	}
	offer := replayOffer{}
	if tok.can(permOperate) && open {
		if offer, err = u.s.replayOffer(r.Context(), er, tok.User); err != nil {
			offer = replayOffer{Why: "cannot tell: " + err.Error()}
		}
	}
	u.render(w, r, http.StatusOK, "entry", tok, map[string]any{"Title": er.Entry.Ref(), "D": d, "Approval": apr,
		"Payload": payload, "PayloadSize": size, "PayloadCut": cut, "Flash": r.URL.Query().Get("flash"),
		"FlashErr": r.URL.Query().Get("err") != "", "ConfirmLast": offer.Last && r.URL.Query().Get("confirm") == "replay",
		"CanOperate": tok.can(permOperate), "CanApprove": tok.can(permApprove), "Open": open, "Offer": offer,
		"MayDecide":  apr != nil && u.mayDecide(tok, apr),
		"CanRelease": replay.Releasable(er), "Ref": er.Entry.Ref(), "Src": sourceRefOf(&er.Entry)})
}

// replayOffer is what the entry page says about "Replay now": whether a
// replay would dispatch, why not, and what it costs of the key's budget.
type replayOffer struct {
	Can  bool
	Why  string // the bulk preview's category when it would not replay
	Cost string // "uses replay 1 of 3", "uses the last of 3 replays"
	// Last: the replay spends the key's last one, so the click asks for a
	// confirmation that says so (issue 30: one click spent an entry's
	// last replay budget without a warning).
	Last bool
}

// replayOffer asks the bulk replay preview about this one entry: the same
// decision (rules, policy, ledger, holds, approvals, route) a bulk replay
// and the bulk page make, so the page never offers what would be refused.
func (s *Server) replayOffer(ctx context.Context, er *store.EntryRecord, actor string) (replayOffer, error) {
	b, err := s.bulk(ctx, &BulkRequest{Max: 1}, actor)
	if err != nil {
		return replayOffer{}, err
	}
	rep, err := b.PreviewReplay(ctx, replay.BulkFilter{IDs: []string{er.Entry.Ref()}})
	if err != nil {
		return replayOffer{}, err
	}
	if len(rep.Items) != 1 {
		return replayOffer{Why: "not found by the preview"}, nil
	}
	if cat := rep.Items[0].Category; cat != replay.WhyReplay {
		return replayOffer{Why: cat}, nil
	}
	view, err := s.cfg.Store.LedgerView(ctx, er.Entry.IdempotencyKey)
	if err != nil {
		return replayOffer{}, err
	}
	d := b.Reconciler.Engine.Decide(ctx, &er.Entry, view)
	used := d.Ledger.Used()
	return replayOffer{Can: true, Cost: replayCost(used, d.MaxReplays), Last: d.MaxReplays > 0 && used+1 >= d.MaxReplays}, nil
}

// replayCost says what one more replay spends of a key's budget.
func replayCost(used, maxReplays int) string {
	switch {
	case maxReplays <= 0:
		return ""
	case used+1 >= maxReplays:
		if maxReplays == 1 {
			return "uses its only replay"
		}
		return fmt.Sprintf("uses the last of %d replays", maxReplays)
	}
	return fmt.Sprintf("uses replay %d of %d", used+1, maxReplays)
}

// entryAct replays, resolves or releases one entry from its page: the
// same calls as the API's POST /api/dead-letters/{id}/{op} and the CLI.
func (u *ui) entryAct(w http.ResponseWriter, r *http.Request, tok Token) {
	id, op := r.PathValue("id"), r.PathValue("op")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	var flash string
	var err error
	switch op {
	case "replay":
		// The last replay of a key is sent only once confirmed; the offer is
		// asked again here, so a budget spent since the page was drawn
		// still asks.
		if r.PostFormValue("confirm") != "last" {
			if er, ferr := replay.Find(r.Context(), u.s.cfg.Store, id); ferr == nil {
				if offer, oerr := u.s.replayOffer(r.Context(), er, tok.User); oerr == nil && offer.Last {
					http.Redirect(w, r, "/entries/"+url.PathEscape(id)+"?confirm=replay#confirm-last", http.StatusSeeOther)
					return
				}
			}
		}
		var res replay.EntryResult
		if res, err = u.s.ReplayOne(r, id, tok.User); err == nil {
			err = replay.NothingDone(&res)
		}
		if err == nil {
			flash = "replay: " + string(res.Final) + ", now " + res.Status
			if res.Outcome != "" {
				flash += " (" + res.Outcome + ")"
			}
			switch {
			case res.Reason == "":
			case res.Outcome == replay.Succeeded.String():
				// A success's detail is the target's answer, not a reason.
				flash += "; the target answered " + res.Reason
			default:
				flash += ": " + res.Reason
			}
		}
	case "resolve", "release":
		if reason == "" {
			err = errors.New("a reason is required to " + op)
			break
		}
		if op == "resolve" {
			_, err = replay.Resolve(r.Context(), u.s.cfg.Store, id, tok.User, reason)
		} else {
			_, err = replay.Release(r.Context(), u.s.cfg.Store, id, tok.User, reason)
		}
		if err == nil {
			flash = op + "d by " + tok.User
		}
	default:
		http.NotFound(w, r)
		return
	}
	q := url.Values{}
	if err != nil {
		flash = op + " not done: " + err.Error()
		q.Set("err", "1")
	}
	q.Set("flash", flash)
	http.Redirect(w, r, "/entries/"+url.PathEscape(id)+"?"+q.Encode(), http.StatusSeeOther)
}
