package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/triage"
)

// outputFlag validates -o.
func outputFormat(o string) (string, error) {
	switch o {
	case "table", "json":
		return o, nil
	}
	return "", usageError("unknown output format %q (want table or json)", o)
}

// jsonArray streams a JSON array, one element per line, so that a plan of
// a million entries is never held in memory.
type jsonArray struct {
	w io.Writer
	n int
}

func newJSONArray(w io.Writer) *jsonArray { return &jsonArray{w: w} }

func (a *jsonArray) add(v any) error {
	sep := ",\n"
	if a.n == 0 {
		sep = "[\n"
	}
	a.n++
	if _, err := io.WriteString(a.w, sep); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = a.w.Write(b)
	return err
}

func (a *jsonArray) end() error {
	if a.n == 0 {
		_, err := io.WriteString(a.w, "[]\n")
		return err
	}
	_, err := io.WriteString(a.w, "\n]\n")
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// decisionRow prints one decision as a fixed-width table row (streamed: a
// tabwriter would hold every row until the end).
const decisionHeader = "%-30s %-8s %-14s %-26s %-16s %s\n"

func printDecisionHeader(w io.Writer) {
	fmt.Fprintf(w, decisionHeader, "ENTRY", "SOURCE", "CLASS", "REASON", "ACTION", "RULE")
}

func printDecisionRow(w io.Writer, d *triage.Decision) {
	class := string(d.Class)
	if d.Unrecognised {
		class += "?"
	}
	fmt.Fprintf(w, decisionHeader, clipLeft(d.EntryID, 30), d.Source, class, clip(orDash(d.ReasonCode), 26), d.Action, d.Rule)
}

func printSummary(w io.Writer, s *replay.Summary) {
	fmt.Fprintf(w, "\n%d entries", s.Total)
	if s.Unrecognised > 0 {
		fmt.Fprintf(w, ", %d unrecognised (class shown as unknown_commit?)", s.Unrecognised)
	}
	if s.Undecodable > 0 {
		fmt.Fprintf(w, ", %d undecodable", s.Undecodable)
	}
	fmt.Fprintln(w)
	actions := s.Actions()
	fmt.Fprintf(w, "%-16s", "CLASS")
	for _, a := range actions {
		fmt.Fprintf(w, " %16s", a)
	}
	fmt.Fprintf(w, " %8s\n", "TOTAL")
	for _, c := range triage.Classes {
		if s.ByClass[c] == 0 {
			continue
		}
		fmt.Fprintf(w, "%-16s", c)
		for _, a := range actions {
			fmt.Fprintf(w, " %16d", s.Cells[c][a])
		}
		fmt.Fprintf(w, " %8d\n", s.ByClass[c])
	}
	fmt.Fprintf(w, "%-16s", "TOTAL")
	for _, a := range actions {
		fmt.Fprintf(w, " %16d", s.ByAction[a])
	}
	fmt.Fprintf(w, " %8d\n", s.Total)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// clipLeft keeps the end, which tells ids apart (an undecodable record's
// id ends in its file:line).
func clipLeft(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-(n-1):]
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
