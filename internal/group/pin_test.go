package group

import (
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
)

// pinEntries cover each branch of the signature: a message with every
// kind of mask, a stack, a source signature, an undecodable record,
// invalid UTF-8 and a line over maxLine.
var pinEntries = []*entry.Entry{
	{Source: "cordum", Topic: "tool.github.pr.create", ReasonCode: "timeout",
		Message: "upstream timeout after 30012 ms calling inventory for order 'ord-81213' at 2026-11-27T07:00:01Z"},
	{Source: "jsonl", Topic: "orders", ReasonCode: "E_DB", Message: "Deadlock on row 550e8400-e29b-41d4-a716-446655440000 (deadbeefcafe)  retry\n\tat a.B(C.java:1)\n  File \"x.py\", line 3\n\tat c.D(E.java:9)\n\tat f.G(H.java:2)"},
	{Source: "prodigy", Topic: "wf", State: entry.SourceState{ErrorSignature: "sig-42"}},
	{Source: "nexora", DecodeError: "bad json at offset 12\nmore"},
	{Source: "s\xff", Topic: "t\xfe", Message: "`q` \"unterminated 0x1f AbCdEf12 x_y"},
	{Source: "jsonl", Topic: "long", ReasonCode: "", Message: string(make([]byte, 300)) + "é tail 1 2 3"},
}

// TestGroupIDsArePinned: group ids are stored (the index, holds, plans):
// a faster signature must name every group as before.
func TestGroupIDsArePinned(t *testing.T) {
	want := []string{
		"g1e120150e9c", "g6164d0e25c9", "g1e120150e9c",
		"gf02bd2eaf49", "gbef361b92b0", "g24143d8f0db",
		"gb5610f86bb4", "gfe95b183fb9", "gb5610f86bb4",
		"g923bec484ac", "g923bec484ac", "g923bec484ac",
		"gddd3898a91c", "g63cae5ce7b7", "gddd3898a91c",
		"g7b7d792befe", "gae68a86186c", "g7b7d792befe",
	}
	i := 0
	for _, e := range pinEntries {
		for _, o := range []Options{Default, {IgnoreTopic: true}, {StackFrames: -1}} {
			if got := o.IDOf(e, "transient"); got != want[i] {
				t.Errorf("entry %d %+v: id %s, pinned %s", i/3, o, got, want[i])
			}
			if got := o.Of(e, "transient").ID(); got != want[i] {
				t.Errorf("entry %d %+v: Of().ID() %s, pinned %s", i/3, o, got, want[i])
			}
			i++
		}
	}
}
