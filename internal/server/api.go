package server

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/approval"
	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// openStates are the states a listing shows by default.
var openStates = store.OpenStates()

// ParseStates turns ?state= (or --state) values into a status filter:
// "open" (the default), "ALL", or statuses, comma-separated or repeated.
func ParseStates(values []string) ([]string, error) {
	var out []string
	if len(values) == 0 {
		return openStates, nil
	}
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			s = strings.ToLower(strings.TrimSpace(s))
			switch {
			case s == "all":
				return nil, nil
			case s == "open":
				out = append(out, openStates...)
			case s == "":
			default:
				valid := false
				for _, k := range store.Statuses {
					valid = valid || k == s
				}
				if !valid {
					return nil, fmt.Errorf("%w: unknown state %q (want open, ALL or one of %s)", errBadRequest, s, strings.Join(store.Statuses, ", "))
				}
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s must be a non-negative integer", errBadRequest, name)
	}
	return n, nil
}

func (s *Server) handleListEntries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	states, err := ParseStates(q["state"])
	if err != nil {
		serviceError(w, err)
		return
	}
	page, err := intParam(r, "page", 0)
	if err != nil {
		serviceError(w, err)
		return
	}
	size, err := pageSize(r, 20)
	if err != nil {
		serviceError(w, err)
		return
	}
	f := replay.Filter{States: states, Classes: q["class"], Actions: q["action"], Sources: q["source"],
		Topic: q.Get("topic"), Q: q.Get("q")}
	for _, l := range q["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			serviceError(w, fmt.Errorf("%w: label must be KEY=VALUE, got %q", errBadRequest, l))
			return
		}
		if f.Labels == nil {
			f.Labels = map[string]string{}
		}
		f.Labels[k] = v
	}
	if a := q.Get("older_than"); a != "" {
		age, err := time.ParseDuration(a)
		if err != nil || age < 0 {
			serviceError(w, fmt.Errorf("%w: older_than must be a duration such as 24h, got %q", errBadRequest, a))
			return
		}
		f.LastFailedBy = s.cfg.Now().Add(-age) // since the last failure, as the console and bulk filters
	}
	var p *replay.Page
	if c := q.Get("cursor"); c != "" || q.Get("page") == "" {
		p, err = replay.ListAfter(r.Context(), s.cfg.Store, f, c, size)
	} else {
		p, err = replay.List(r.Context(), s.cfg.Store, f, page, size)
	}
	if errors.Is(err, store.ErrBadCursor) || errors.Is(err, store.ErrBadFilter) || errors.Is(err, store.ErrNotIndexed) {
		err = fmt.Errorf("%w: %v", errBadRequest, err)
	}
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) handleShowEntry(w http.ResponseWriter, r *http.Request) {
	d, err := replay.Show(r.Context(), s.cfg.Store, r.PathValue("id"))
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

type reasonBody struct {
	Reason string `json:"reason"`
}

func (s *Server) handleResolveEntry(w http.ResponseWriter, r *http.Request) {
	var body reasonBody
	if !readJSON(w, r, &body) {
		return
	}
	if strings.TrimSpace(body.Reason) == "" {
		writeError(w, http.StatusBadRequest, "bad_request", `a reason is required: {"reason": "..."}`)
		return
	}
	er, err := replay.Resolve(r.Context(), s.cfg.Store, r.PathValue("id"), user(r).User, body.Reason)
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, er)
}

func (s *Server) handleReleaseEntry(w http.ResponseWriter, r *http.Request) {
	body := reasonBody{Reason: "released by operator"}
	if !readJSON(w, r, &body) {
		return
	}
	er, err := replay.Release(r.Context(), s.cfg.Store, r.PathValue("id"), user(r).User, body.Reason)
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, er)
}

// handleReplayEntry reconciles one entry now (409 unless it is open and
// not held). It shares the one-run-at-a-time rule with reconciles.
func (s *Server) handleReplayEntry(w http.ResponseWriter, r *http.Request) {
	var body struct{}
	if !readJSON(w, r, &body) {
		return
	}
	res, err := s.ReplayOne(r, r.PathValue("id"), user(r).User)
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// ReplayOne runs one entry through policy and ledger now.
func (s *Server) ReplayOne(r *http.Request, id, actor string) (replay.EntryResult, error) {
	er, err := replay.Find(r.Context(), s.cfg.Store, id)
	if err != nil {
		return replay.EntryResult{}, err
	}
	switch er.Status {
	case store.StatusPending, store.StatusAwaitingApproval, store.StatusManualReview, store.StatusUnknown:
	case store.StatusReplayed:
		// One refuses it, in the words of the local `dlq replay`.
	default:
		return replay.EntryResult{}, fmt.Errorf("%w: %s is %s, not pending", replay.ErrState, er.Entry.Ref(), er.Status)
	}
	engine, snap, err := s.cfg.Engine(r.Context())
	if err != nil {
		return replay.EntryResult{}, err
	}
	if err := s.cfg.Store.PutSnapshot(r.Context(), snap.ID, snap); err != nil {
		return replay.EntryResult{}, err
	}
	rc := &replay.Reconciler{Engine: engine, Store: s.cfg.Store, Router: s.cfg.Router(engine.Rules), Actor: actor,
		ApprovalTTL: s.cfg.Approvers.Expiry, Breakers: s.cfg.Breakers, ForEntry: s.cfg.ForEntry}
	res, err := rc.One(r.Context(), er)
	if err == nil {
		s.metrics.observeEntry(res)
	}
	return res, err
}

func (s *Server) handlePlan(w http.ResponseWriter, r *http.Request) {
	engine, _, err := s.cfg.Engine(r.Context())
	if err != nil {
		serviceError(w, err)
		return
	}
	size, err := pageSize(r, MaxPageSize)
	if err != nil {
		serviceError(w, err)
		return
	}
	skip, err := offsetCursor(r)
	if err != nil {
		serviceError(w, err)
		return
	}
	// The summary counts every decision; the decisions are one page
	// (a later page plans again and skips what earlier ones served).
	planner := &replay.Planner{Engine: engine, Ledger: s.cfg.Store}
	out := []triage.Decision{}
	sum := replay.NewSummary()
	n := 0
	err = planner.Plan(r.Context(), s.cfg.Sources, func(_ *entry.Entry, d *triage.Decision) error {
		sum.Add(d)
		if n >= skip && len(out) < size {
			out = append(out, *d)
		}
		n++
		return nil
	})
	if err != nil {
		serviceError(w, err)
		return
	}
	if skip+len(out) < n {
		w.Header().Set(NextCursorHeader, strconv.Itoa(skip+len(out)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"decisions": out, "summary": sum})
}

func (s *Server) handleStartRun(w http.ResponseWriter, r *http.Request) {
	var body struct{}
	if !readJSON(w, r, &body) {
		return
	}
	loaded := s.loadForRun(w, r)
	if loaded == nil {
		return
	}
	run, err := s.runs.startReconcile("api", user(r).User, loaded)
	if err != nil {
		writeJSON(w, http.StatusConflict, map[string]any{"error": Error{Code: "conflict", Message: err.Error()}, "run": run.ID})
		return
	}
	w.Header().Set("Location", "/api/runs/"+run.ID)
	writeJSON(w, http.StatusAccepted, map[string]string{"id": run.ID, "state": "running"})
}

func (s *Server) handleGetRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.runs.get(r.PathValue("id"))
	if !ok {
		s.handleStoredRun(w, r) // a run of another process, or of before a restart
		return
	}
	writeJSON(w, http.StatusOK, run)
}

func (s *Server) approvals() *approval.Service {
	return &approval.Service{Store: s.cfg.Store, Config: s.cfg.Approvers, Now: s.cfg.Now}
}

func (s *Server) handleListApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state, err := approvalState(q.Get("state"))
	if err != nil {
		serviceError(w, err)
		return
	}
	size, err := pageSize(r, MaxPageSize)
	if err != nil {
		serviceError(w, err)
		return
	}
	skip, err := offsetCursor(r)
	if err != nil {
		serviceError(w, err)
		return
	}
	list, err := s.approvals().List(r.Context(), approval.Filter{Group: q.Get("group"), State: state})
	if err != nil {
		serviceError(w, err)
		return
	}
	page := list[min(skip, len(list)):]
	if len(page) > size {
		page = page[:size]
		w.Header().Set(NextCursorHeader, strconv.Itoa(skip+size))
	}
	writeJSON(w, http.StatusOK, page)
}

// approvalState turns ?state= into a filter: "" or "all" is every state
// (before, "all" matched no record and the list came back empty, which
// reads as "nothing waits"); an unknown state is a bad request for the
// same reason.
func approvalState(v string) (string, error) {
	if v == "" || strings.EqualFold(v, "all") {
		return "", nil
	}
	for _, st := range []string{store.ApprovalPending, store.ApprovalApproved, store.ApprovalRejected, store.ApprovalExpired, store.ApprovalStale} {
		if strings.EqualFold(v, st) {
			return st, nil
		}
	}
	return "", fmt.Errorf("%w: unknown approval state %q (want all, pending, approved, rejected, expired or stale)", errBadRequest, v)
}

func (s *Server) handleDecideApproval(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body reasonBody
		if !readJSON(w, r, &body) {
			return
		}
		a, err := s.DecideApproval(r, r.PathValue("id"), user(r).User, approve, body.Reason)
		if err != nil {
			serviceError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, a)
	}
}

// DecideApproval checks the request's evidence against a decision made
// now, then records the person's decision (four-eyes, group, once).
func (s *Server) DecideApproval(r *http.Request, id, actor string, approve bool, reason string) (*store.Approval, error) {
	return s.decideApproval(r, s.requestEngine(), id, actor, approve, reason)
}

// decideApproval is DecideApproval on eng, which a request deciding
// several approvals shares: the rules and policies are compiled once.
func (s *Server) decideApproval(r *http.Request, eng *requestEngine, id, actor string, approve bool, reason string) (*store.Approval, error) {
	if !approve && strings.TrimSpace(reason) == "" {
		return nil, fmt.Errorf("%w: a reason is required to reject", errBadRequest)
	}
	var current string
	var a *store.Approval
	if err := s.cfg.Store.View(r.Context(), func(tx store.Tx) error {
		var err error
		a, err = tx.Approval(id)
		return err
	}); err != nil {
		return nil, err
	}
	if a != nil {
		if er, err := replay.Find(r.Context(), s.cfg.Store, a.EntryRef); err == nil {
			engine, _, err := eng.get(r.Context())
			if err != nil {
				return nil, err
			}
			d, err := (&replay.Planner{Engine: engine, Ledger: s.cfg.Store}).DecideStored(r.Context(), er)
			if err != nil {
				return nil, err
			}
			current = d.EvidenceHash
		}
	}
	// Signed in through a trusted proxy, the user's proxy groups may make
	// them a member of approver groups (the API and the UI alike).
	var groups []string
	if tok, ok := s.authenticate(r); ok && tok.User == actor {
		groups = tok.Groups
	}
	return s.approvals().Decide(r.Context(), approval.Decision{ID: id, Actor: actor, Approve: approve, Reason: reason,
		CurrentEvidence: current, Groups: groups})
}

func (s *Server) handleListAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	aq := audit.Query{Entry: q.Get("entry"), Actor: q.Get("actor"), Action: q.Get("action"), Kind: q.Get("kind")}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "since must be RFC 3339")
			return
		}
		aq.Since = t
	}
	size, err := pageSize(r, MaxPageSize)
	if err != nil {
		serviceError(w, err)
		return
	}
	// The cursor is the last record a page served: the next starts after.
	var after uint64
	if c := q.Get("cursor"); c != "" {
		if after, err = strconv.ParseUint(c, 10, 64); err != nil {
			serviceError(w, fmt.Errorf("%w: cursor %q is not a record number", errBadRequest, c))
			return
		}
	}
	out := []audit.Record{}
	more := false
	err = replay.EachAudit(r.Context(), s.cfg.Store, after+1, aq, func(rec audit.Record) error {
		if len(out) == size {
			more = true
			return errPageFull
		}
		out = append(out, rec)
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		serviceError(w, err)
		return
	}
	if more {
		w.Header().Set(NextCursorHeader, strconv.FormatUint(out[len(out)-1].Seq, 10))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleExportAudit streams the chain as JSON lines, for `audit export
// --server`, verifying as it goes. Once the first line is out the status is
// sent, so a broken link ends the body with an error line and the
// audit.ExportErrorTrailer trailer (the CLI exits non-zero on it); an
// unreadable store mid-chain aborts the body, which the client sees cut.
func (s *Server) handleExportAudit(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Trailer", audit.ExportErrorTrailer)
	bw := bufio.NewWriter(w)
	err := audit.Export(r.Context(), s.cfg.Store, bw, s.cfg.AuditKey)
	var brk *audit.Break
	if err != nil && !errors.As(err, &brk) {
		bw.Flush()
		panic(http.ErrAbortHandler)
	}
	bw.Flush()
	if brk != nil {
		w.Header().Set(audit.ExportErrorTrailer, brk.Error())
	}
}

// handleSnapshot serves a recorded policy snapshot (rules and policy text),
// which `audit replay-decision --server` re-runs a decision on.
func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	var snap triage.Snapshot
	err := s.cfg.Store.Snapshot(r.Context(), r.PathValue("id"), &snap)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no policy snapshot "+r.PathValue("id"))
		return
	}
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (s *Server) handleShowAudit(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "decision id must be a number")
		return
	}
	rec, err := audit.Get(r.Context(), s.cfg.Store, seq)
	if errors.Is(err, audit.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (s *Server) handleVerifyAudit(w http.ResponseWriter, r *http.Request) {
	cp, err := audit.CheckpointFromQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	var res *audit.VerifyResult
	if cp == nil && r.URL.Query().Get("incremental") == "1" {
		// Only the records appended since the last verification
		// (verified_from says where it started); the default stays a full walk.
		res, err = s.verified.Verify(r.Context(), s.cfg.Store, s.cfg.AuditKey)
	} else {
		res, err = audit.VerifyWith(r.Context(), s.cfg.Store, audit.VerifyOptions{Key: s.cfg.AuditKey, Checkpoint: cp})
	}
	if errors.Is(err, audit.ErrCheckpointSignature) {
		writeError(w, http.StatusUnprocessableEntity, "bad_checkpoint", err.Error())
		return
	}
	if err != nil {
		serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleCheckpoint exports the verified head, signed with the server's
// key, for `audit checkpoint --server`.
func (s *Server) handleCheckpoint(w http.ResponseWriter, r *http.Request) {
	cp, err := audit.NewCheckpoint(r.Context(), s.cfg.Store, s.cfg.AuditKey, s.cfg.Now())
	if err != nil {
		writeError(w, http.StatusConflict, "conflict", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, cp)
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	st, err := replay.ComputeStats(r.Context(), s.cfg.Store, s.cfg.Now())
	if err != nil {
		serviceError(w, err)
		return
	}
	st.Breakers = s.breakerStates()
	writeJSON(w, http.StatusOK, st)
}
