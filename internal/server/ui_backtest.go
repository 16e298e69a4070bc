package server

import (
	"html/template"
	"net/http"
	"strings"

	"github.com/replayctl/replayctl/internal/triage"
)

// parsePages parses pages that need only the layout (the plan and
// backtest pages), kept apart from newUI's list so that they stay in
// their own files.
func (u *ui) parsePages(funcs template.FuncMap, pages ...string) error {
	for _, page := range pages {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return err
		}
		u.tmpl[page] = t
	}
	return nil
}

// backtestForm is what the backtest page's form holds.
type backtestForm struct {
	Candidate, Rules, Policy, Since, Source string
}

// backtestData is what both the form and its answer show.
func (u *ui) backtestData(f backtestForm) map[string]any {
	var srcs []string
	for _, s := range u.s.cfg.Sources {
		srcs = append(srcs, s.String())
	}
	return map[string]any{"Title": "Policy backtest", "Form": f, "Candidates": u.s.cfg.BacktestCandidates, "Sources": srcs}
}

// backtestPage shows the form: a candidate (pasted text, or one the
// server is configured with), the window, and what to re-decide.
func (u *ui) backtestPage(w http.ResponseWriter, r *http.Request, tok Token) {
	f := backtestForm{Since: "30d"}
	if len(u.s.cfg.BacktestCandidates) > 0 {
		f.Candidate = u.s.cfg.BacktestCandidates[0].Name
	}
	u.render(w, r, http.StatusOK, "backtest", tok, u.backtestData(f))
}

// backtestRun answers the form with the report. A POST because the
// candidate's text travels in the body; a read (it writes nothing and
// sends nothing), so the read permission does, as for the API.
func (u *ui) backtestRun(w http.ResponseWriter, r *http.Request, tok Token) {
	f := backtestForm{Candidate: r.PostFormValue("candidate"), Rules: r.PostFormValue("rules"),
		Policy: r.PostFormValue("policy"), Since: strings.TrimSpace(r.PostFormValue("since")), Source: r.PostFormValue("source")}
	data := u.backtestData(f)
	req := &BacktestRequest{}
	if f.Candidate == "" {
		req.Rules = triage.SourceFile{Name: "rules.yaml", Text: f.Rules}
		if strings.TrimSpace(f.Policy) != "" {
			req.Policies = []triage.SourceFile{{Name: "candidate.rego", Text: f.Policy}}
		}
	} else {
		req.Candidate = f.Candidate
	}
	if f.Source != "" {
		req.Sources = []string{f.Source}
		if f.Source == "*" {
			req.Sources = data["Sources"].([]string)
		}
	}
	if f.Since != "" && f.Source == "" {
		d, err := triage.ParsePeriod(f.Since)
		if err != nil {
			data["Error"] = "since: " + err.Error()
			u.render(w, r, http.StatusBadRequest, "backtest", tok, data)
			return
		}
		req.Since = u.s.cfg.Now().Add(-d).UTC()
	}
	rep, err := u.s.Backtest(r.Context(), req)
	if err != nil {
		data["Error"] = err.Error()
		u.render(w, r, http.StatusUnprocessableEntity, "backtest", tok, data)
		return
	}
	data["Report"] = rep
	data["FromSources"] = len(req.Sources) > 0
	data["AutoAction"] = triage.AutoReplay
	u.render(w, r, http.StatusOK, "backtest", tok, data)
}
