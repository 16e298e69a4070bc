package triage

import (
	"strings"
	"testing"
)

// byStrictness is the documented order, least strict first.
var byStrictness = []Action{AutoReplay, RequireApproval, ManualReview, Quarantine, Skip}

func TestStricterFollowsTheDocumentedOrder(t *testing.T) {
	for i, a := range byStrictness {
		for j, b := range byStrictness {
			want := a
			if j > i {
				want = b
			}
			if got := Stricter(a, b); got != want {
				t.Errorf("Stricter(%s, %s) = %s, want %s", a, b, got, want)
			}
			if Stricter(a, b) != Stricter(b, a) {
				t.Errorf("Stricter(%s, %s) depends on the argument order", a, b)
			}
		}
	}
}

func TestParseAction(t *testing.T) {
	valid := []struct {
		in   string
		want Action
	}{
		{"auto_replay", AutoReplay},
		{"require_approval", RequireApproval},
		{"manual_review", ManualReview},
		{"quarantine", Quarantine},
		{"AUTO_REPLAY", AutoReplay},
		{"  Quarantine\t", Quarantine},
	}
	for _, c := range valid {
		if got, err := ParseAction(c.in); err != nil || got != c.want {
			t.Errorf("ParseAction(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	// skip is a decision's outcome, never something a rule or a policy asks for.
	for _, in := range []string{"", "skip", "replay", "auto-replay", "approve"} {
		got, err := ParseAction(in)
		if err == nil {
			t.Errorf("ParseAction(%q) = %q, want an error", in, got)
			continue
		}
		if !strings.Contains(err.Error(), `"`+in+`"`) || !strings.Contains(err.Error(), "auto_replay, require_approval, quarantine or manual_review") {
			t.Errorf("ParseAction(%q): error %q should quote the input and list the actions", in, err)
		}
	}
}

func TestParseClass(t *testing.T) {
	for _, c := range Classes {
		for _, in := range []string{string(c), strings.ToUpper(string(c)), " " + string(c) + " "} {
			if got, err := ParseClass(in); err != nil || got != c {
				t.Errorf("ParseClass(%q) = %q, %v; want %q", in, got, err, c)
			}
		}
	}
	for _, in := range []string{"", "flaky", "unknown", "unknown-commit"} {
		got, err := ParseClass(in)
		if err == nil {
			t.Errorf("ParseClass(%q) = %q, want an error", in, got)
			continue
		}
		if !strings.Contains(err.Error(), `"`+in+`"`) || !strings.Contains(err.Error(), "transient, poison, governance or unknown_commit") {
			t.Errorf("ParseClass(%q): error %q should quote the input and list the classes", in, err)
		}
	}
}

func TestDefaultAction(t *testing.T) {
	want := map[Class]Action{
		Transient:     AutoReplay,
		Poison:        Quarantine,
		Governance:    RequireApproval,
		UnknownCommit: ManualReview,
		"":            ManualReview, // anything unexpected needs a person
		"other":       ManualReview,
	}
	for c, a := range want {
		if got := DefaultAction(c); got != a {
			t.Errorf("DefaultAction(%q) = %s, want %s", c, got, a)
		}
	}
}

func TestNeedsPerson(t *testing.T) {
	want := map[Action]bool{AutoReplay: false, RequireApproval: true, ManualReview: true, Quarantine: true, Skip: false}
	for a, w := range want {
		if a.NeedsPerson() != w {
			t.Errorf("%s.NeedsPerson() = %v, want %v", a, !w, w)
		}
	}
}
