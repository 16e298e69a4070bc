package main

import (
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/replay"
)

// A bulk execute runs only when confirmed: --yes, or a person's answer on
// a terminal; off a terminal without --yes it is a preview (the
// bulk_confirm story runs that through the binary).
func TestBulkExecuteIsConfirmed(t *testing.T) {
	small := &replay.BulkReport{Op: "replay", Preview: true, Matched: 3, Would: 2}
	big := &replay.BulkReport{Op: "resolve", Preview: true, Matched: 250, Would: 240}
	for _, c := range []struct {
		name             string
		f                bulkFlags
		p                *replay.BulkReport
		terminal         bool
		answer           string
		execute, asked   bool
		prompt, notInErr string
	}{
		{name: "preview", f: bulkFlags{preview: true, yes: true}, p: small, terminal: true},
		{name: "yes", f: bulkFlags{yes: true}, p: big, execute: true},
		{name: "no terminal, no --yes", f: bulkFlags{confirmOver: 100}, p: small, answer: "y\n"},
		{name: "terminal, yes", f: bulkFlags{confirmOver: 100}, p: small, terminal: true, answer: "y\n",
			execute: true, asked: true, prompt: "replay 2 of the 3 matching entries? [y/N] "},
		{name: "terminal, YES", f: bulkFlags{confirmOver: 100}, p: small, terminal: true, answer: " YES \n", execute: true, asked: true},
		{name: "terminal, enter", f: bulkFlags{confirmOver: 100}, p: small, terminal: true, answer: "\n", asked: true},
		{name: "terminal, end of input", f: bulkFlags{confirmOver: 100}, p: small, terminal: true, answer: "", asked: true},
		{name: "over confirm-over: y is not enough", f: bulkFlags{confirmOver: 100}, p: big, terminal: true, answer: "y\n", asked: true,
			prompt: "resolve 240 of the 250 matching entries? More than 100 match: type 240 to confirm: "},
		{name: "over confirm-over: the count", f: bulkFlags{confirmOver: 100}, p: big, terminal: true, answer: "240\n", execute: true, asked: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb strings.Builder
			s := &streams{in: strings.NewReader(c.answer), out: &out, err: &errb}
			execute, asked := c.f.decideExecute(s, c.p, c.terminal)
			if execute != c.execute || asked != c.asked {
				t.Errorf("execute %v, asked %v; want %v, %v", execute, asked, c.execute, c.asked)
			}
			if c.prompt != "" && !strings.HasSuffix(errb.String(), c.prompt) {
				t.Errorf("stderr %q does not end with the question %q", errb.String(), c.prompt)
			}
			if asked && !strings.Contains(errb.String(), "preview of bulk") {
				t.Errorf("asked without showing the preview first: %q", errb.String())
			}
			if out.Len() > 0 {
				t.Errorf("the question went to stdout: %q", out.String())
			}
		})
	}
}
