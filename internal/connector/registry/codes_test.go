package registry

import (
	"slices"
	"strings"
	"testing"
)

// TestCodesAreListedWithClassAndPlace: every code a connector lists has a
// class triage knows and says where upstream writes it, and the list is
// sorted, so the taxonomy built from it is the same on every run.
func TestCodesAreListedWithClassAndPlace(t *testing.T) {
	classes := []string{"transient", "poison", "governance", "unknown_commit", "generic", "unrecognised"}
	cs := Codes()
	if len(cs) == 0 {
		t.Fatal("no connector lists a reason code")
	}
	seen := map[string]string{}
	for i, c := range cs {
		if c.Code == "" || c.Code != strings.ToLower(strings.TrimSpace(c.Code)) {
			t.Errorf("code %q: want a lower-case code", c.Code)
		}
		if !slices.Contains(classes, c.Class) {
			t.Errorf("code %q: class %q, want one of %v", c.Code, c.Class, classes)
		}
		if c.Where == "" {
			t.Errorf("code %q: no place upstream", c.Code)
		}
		if i > 0 && cs[i-1].Code > c.Code {
			t.Errorf("codes not sorted: %q before %q", cs[i-1].Code, c.Code)
		}
		if prev, ok := seen[c.Code]; ok && prev != c.Class {
			t.Errorf("code %q listed as %s and %s: two systems disagree", c.Code, prev, c.Class)
		}
		seen[c.Code] = c.Class
	}
	for _, code := range []string{"safety_denied", "job_status_denied", "step_failed", "merge_conflict"} {
		if _, ok := seen[code]; !ok {
			t.Errorf("%s: no connector lists it", code)
		}
	}
}
