package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/mattn/go-runewidth"

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

// The plan table is streamed (a plan over a large DLQ must not wait for, or
// hold, every row), so column widths are fixed up front rather than measured
// over all rows as a table library's renderer does. Widths are display cells
// measured with go-runewidth, so wide characters keep the columns aligned;
// CLASS fits "unknown_commit?"; an entry id is never clipped: one longer than
// its column gets a line of its own and the row continues below it, aligned.
var decisionCols = []int{30, 8, 15, 26, 16, 24}

func printDecisionHeader(w io.Writer) {
	writeCells(w, decisionCols, "ENTRY", "SOURCE", "CLASS", "REASON", "ACTION", "RULE", "WHY")
}

func printDecisionRow(w io.Writer, d *triage.Decision) {
	class := string(d.Class)
	if d.Unrecognised {
		class += "?"
	}
	id := d.EntryID
	if runewidth.StringWidth(id) > decisionCols[0] {
		fmt.Fprintln(w, id)
		id = ""
	}
	writeCells(w, decisionCols, id, d.Source, class, orDash(d.ReasonCode), string(d.Action), orDash(d.Rule), lastOf(d.Reasons))
}

// writeCells pads each cell but the last to its width in display cells,
// clipping on the right (the start of a reason code or rule names it).
func writeCells(w io.Writer, widths []int, cells ...string) {
	var b strings.Builder
	for i, c := range cells {
		if i == len(cells)-1 {
			b.WriteString(c)
			break
		}
		if runewidth.StringWidth(c) > widths[i] {
			c = runewidth.Truncate(c, widths[i], "…")
		}
		b.WriteString(runewidth.FillRight(c, widths[i]))
		b.WriteByte(' ')
	}
	fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
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

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
