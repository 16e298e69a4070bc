package group

import (
	"encoding/json"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/gen"
)

func TestNormaliseMasksWhatVaries(t *testing.T) {
	cases := []struct{ a, b string }{
		{"order 12345 failed", "order 99 failed"},
		{"user 550e8400-e29b-41d4-a716-446655440000 not found", "user 123e4567-e89b-12d3-a456-426614174000 not found"},
		{"at 2026-11-27T07:30:36.123Z deadline exceeded", "at 2025-01-02T23:59:59Z deadline exceeded"},
		{"key 'acct-7' locked", "key 'other thing' locked"},
		{`field "amount" invalid`, `field "currency" invalid`},
		{"hash deadbeefcafebabe mismatch", "hash 0123456789abcdef mismatch"},
		{"connect 10.0.0.1:5432 refused", "connect 192.168.1.20:6543 refused"},
		{"Timeout  after 30s", "timeout after 5s"},
	}
	for _, c := range cases {
		if x, y := Normalise(c.a), Normalise(c.b); x != y {
			t.Errorf("%q -> %q, %q -> %q: want the same", c.a, x, c.b, y)
		}
	}
	apart := []struct{ a, b string }{
		{"connection refused", "connection reset"},
		{"order failed", "payment failed"},
		{"can't parse", "cannot parse"},
	}
	for _, c := range apart {
		if x, y := Normalise(c.a), Normalise(c.b); x == y {
			t.Errorf("%q and %q both -> %q: want them apart", c.a, c.b, x)
		}
	}
	if got := Normalise("order 12345 failed"); got != "order # failed" {
		t.Errorf("got %q", got)
	}
}

func TestStackTopFramesJoinTheSignature(t *testing.T) {
	a := &entry.Entry{Source: "jsonl", Topic: "orders", ReasonCode: "E", Message: "NullPointerException: x\n\tat com.acme.Pay.charge(Pay.java:42)\n\tat com.acme.Api.post(Api.java:7)"}
	b := &entry.Entry{Source: "jsonl", Topic: "orders", ReasonCode: "E", Message: "NullPointerException: x\n\tat com.acme.Pay.charge(Pay.java:43)\n\tat com.acme.Api.post(Api.java:9)"}
	c := &entry.Entry{Source: "jsonl", Topic: "orders", ReasonCode: "E", Message: "NullPointerException: x\n\tat com.acme.Ship.send(Ship.java:42)"}
	if Of(a, "poison").ID() != Of(b, "poison").ID() {
		t.Errorf("same frames, other lines: %q vs %q", Of(a, "poison").Error, Of(b, "poison").Error)
	}
	if Of(a, "poison").ID() == Of(c, "poison").ID() {
		t.Errorf("other top frame, same group %q", Of(a, "poison").Error)
	}
	if Of(a, "poison").ID() == Of(a, "transient").ID() {
		t.Error("class is part of the group")
	}
	noStack := Options{StackFrames: -1}
	if noStack.Of(a, "poison").ID() != noStack.Of(c, "poison").ID() {
		t.Error("with stack_frames -1 the frames are left out")
	}
}

func TestSourceSignatureWins(t *testing.T) {
	a := &entry.Entry{Source: "prodigy", Message: "boom 1", State: entry.SourceState{ErrorSignature: "sig-A"}}
	b := &entry.Entry{Source: "prodigy", Message: "totally other", State: entry.SourceState{ErrorSignature: "sig-A"}}
	if Of(a, "").ID() != Of(b, "").ID() {
		t.Error("the source's own signature groups")
	}
	if !IsID(Of(a, "").ID()) || IsID("g123") || IsID("G0123456789a") {
		t.Error("IsID")
	}
}

func FuzzNormalise(f *testing.F) {
	for _, s := range []string{"", "'", "a'b", "\"x", "#-#", "2026-01-01T00:00:00Z", "\xff\xfe 12"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := Normalise(s)
		if len(n) <= maxLine && Normalise(n) != n { // a longer one is cut again
			t.Errorf("not idempotent: %q -> %q -> %q", s, n, Normalise(n))
		}
	})
}

func TestGroupIsTheSameFromTheStoredJSON(t *testing.T) {
	e := &entry.Entry{Source: "jsonl", Topic: "t\xff", ReasonCode: "E", Message: "bad \xfe\xfd byte 12"}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var back entry.Entry
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if Of(e, "poison").ID() != Of(&back, "poison").ID() {
		t.Errorf("%+v vs %+v", Of(e, "poison"), Of(&back, "poison"))
	}
}

// BenchmarkGroupOf is the cost the store pays per entry write to keep the
// group index (compare with BenchmarkDecide in internal/triage).
func BenchmarkGroupOf(b *testing.B) {
	e := &entry.Entry{Source: "cordum", Topic: "tool.github.pr.create", ReasonCode: "timeout",
		Message: "upstream timeout after 30012 ms calling inventory for order 'ord-81213' at 2026-11-27T07:00:01Z"}
	for b.Loop() {
		_ = IDOf(e, "transient")
	}
}

// IDOf, the store's fast path, names the same group as Of(...).ID().
func TestIDOfIsTheKeysID(t *testing.T) {
	for _, e := range []*entry.Entry{
		{Source: "jsonl", Topic: "t", ReasonCode: "E", Message: "x 12\n\tat a.B(C.java:1)"},
		{Source: "cordum", DecodeError: "bad json at 12"},
		{Source: "prodigy", State: entry.SourceState{ErrorSignature: "sig"}},
		{Source: "s\xff", Topic: "", Message: "'q' 0x1f"},
	} {
		for _, o := range []Options{Default, {IgnoreTopic: true}, {StackFrames: -1}} {
			if got, want := o.IDOf(e, "poison"), o.Of(e, "poison").ID(); got != want {
				t.Errorf("%+v %+v: IDOf %s, Of().ID() %s", e, o, got, want)
			}
		}
	}
}

// BenchmarkGroupCorpus is the assignment over the micro benchmark's
// corpus (internal/benchmark/micro.go: gen, seed 4).
func BenchmarkGroupCorpus(b *testing.B) {
	var es []entry.Entry
	if err := gen.Each(gen.Options{N: 1000, Seed: 4}, func(r gen.Record) error {
		es = append(es, entry.Entry{Source: "jsonl", ID: r.ID, Topic: r.Topic, ReasonCode: r.Reason, Message: r.Message, Labels: r.Labels})
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		_ = IDOf(&es[i%len(es)], "transient")
		i++
	}
}
