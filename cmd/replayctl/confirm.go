package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/term"

	"github.com/replayctl/replayctl/internal/replay"
)

// Every bulk execute is confirmed (issue 30: `dlq replay --filter` without
// --preview or --yes executed at once when 100 or fewer entries matched).
// --yes confirms it anywhere; on a terminal, without --yes, replayctl shows
// the preview and asks, and above --confirm-over matches the answer must be
// the number of entries to act on; off a terminal (cron, scripts, pipes)
// nothing is executed without --yes.

// stdinTerminal: a person can answer on the command's input.
func stdinTerminal(in io.Reader) bool {
	f, ok := in.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// decideExecute says whether the operation previewed by p runs, and
// whether a person was asked (their "no" needs no other hint).
func (f *bulkFlags) decideExecute(s *streams, p *replay.BulkReport, terminal bool) (execute, asked bool) {
	switch {
	case f.preview:
		return false, false
	case f.yes:
		return true, false
	case !terminal:
		return false, false
	}
	printBulk(s.err, p, &bulkFlags{preview: true})
	return askConfirm(s.in, s.err, p, f.confirmOver), true
}

// askConfirm asks on out and reads one answer from in: y or yes, or, above
// over matches, the number of entries the operation would act on.
func askConfirm(in io.Reader, out io.Writer, p *replay.BulkReport, over int) bool {
	what := fmt.Sprintf("%s %d of the %d matching entries", p.Op, p.Would, p.Matched)
	want := ""
	if p.Matched > over {
		want = strconv.Itoa(p.Would)
		fmt.Fprintf(out, "%s? More than %d match: type %s to confirm: ", what, over, want)
	} else {
		fmt.Fprintf(out, "%s? [y/N] ", what)
	}
	line, _ := bufio.NewReader(io.LimitReader(in, 1024)).ReadString('\n')
	ans := strings.ToLower(strings.TrimSpace(line))
	if want != "" {
		return ans == want
	}
	return ans == "y" || ans == "yes"
}
