package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The runner against a small module of its own (testdata/sample): a
// passing package with subtests and a skip, one with a failing test, one
// that does not build. Counts are of tests and subtests; a package that
// does not build is one failed case; a failing test's output is shown.
func TestRunnerCountsAndShowsFailures(t *testing.T) {
	var out strings.Builder
	r := &runner{ctx: context.Background(), dir: "testdata/sample", out: &out}
	r.tests([]string{"./pass", "./fail", "./broken"}, 1, false)
	got := out.String()
	t.Log(got)
	// pass: TestOne, TestSub, TestSub/a, TestSub/b; fail: TestFine.
	if r.passed != 5 || r.skipped != 1 {
		t.Errorf("passed %d, skipped %d; want 5 and 1", r.passed, r.skipped)
	}
	want := []string{"./fail TestBroken", "./broken [build]"}
	if strings.Join(r.failures, "|") != strings.Join(want, "|") {
		t.Errorf("failures %q, want %q", r.failures, want)
	}
	for _, s := range []string{
		"ok   ./pass", "(4 passed, 1 skipped)",
		"--- FAIL: ./fail TestBroken", "the detail a failure needs", "boom",
		"FAIL ./fail", "FAIL ./broken [build failed]", `"not a number"`,
	} {
		if !strings.Contains(got, s) {
			t.Errorf("output lacks %q", s)
		}
	}
	if strings.Contains(got, "=== RUN") {
		t.Error("output keeps the === RUN lines")
	}
}

func TestSlowPackagesNameTheirSlowestTests(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"pass","Test":"TestA","Elapsed":2}`,
		`{"Action":"pass","Test":"TestB","Elapsed":40}`,
		`{"Action":"pass","Test":"TestB/sub","Elapsed":39}`,
		`{"Action":"pass","Test":"TestC","Elapsed":7}`,
		`{"Action":"pass","Test":"TestD","Elapsed":1}`,
		`{"Action":"pass","Elapsed":50}`,
	}, "\n")
	res := readEvents(strings.NewReader(stream))
	if got := slowNote(res); got != "; slowest: TestB 40s, TestC 7s, TestA 2s" {
		t.Errorf("%q", got)
	}
	res.elapsed = 10
	if got := slowNote(res); got != "" {
		t.Errorf("a quick package names its tests: %q", got)
	}
}

// The tests of withoutRace run in a job of their own without -race and
// the package's race job skips them: every test runs once, and a pattern
// that matches no test fails instead of dropping it.
func TestWithoutRaceSplitsAPackage(t *testing.T) {
	var out strings.Builder
	r := &runner{ctx: context.Background(), dir: "testdata/sample", out: &out,
		noRace: map[string]string{"./pass": "^TestOne$"}}
	r.tests([]string{"./pass"}, 1, true)
	got := out.String()
	t.Log(got)
	// The race job: TestSub, TestSub/a, TestSub/b and the skip; the other: TestOne.
	for _, s := range []string{"ok   ./pass (no -race)", "(1 passed)", "ok   ./pass ", "(3 passed, 1 skipped)"} {
		if !strings.Contains(got, s) {
			t.Errorf("output lacks %q", s)
		}
	}
	if r.passed != 4 || len(r.failures) != 0 {
		t.Errorf("passed %d, failures %q; want 4 and none", r.passed, r.failures)
	}

	out.Reset()
	r = &runner{ctx: context.Background(), dir: "testdata/sample", out: &out,
		noRace: map[string]string{"./pass": "^TestRenamed$"}}
	r.tests([]string{"./pass"}, 1, true)
	if want := []string{"./pass (no -race)"}; strings.Join(r.failures, "|") != strings.Join(want, "|") {
		t.Errorf("a pattern matching no test: failures %q, want %q\n%s", r.failures, want, out.String())
	}
}

// The fuzz step builds a package's instrumented test binary once and runs
// each target with it as go test -fuzz would: a target that passes is one
// case, one that fails shows its output and leaves its crasher under the
// package's testdata/fuzz (here a copy of the sample module, so the
// repository's testdata stays as it is).
func TestFuzzRunsEveryTargetFromOneBuild(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/sample")); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r := &runner{ctx: context.Background(), dir: dir, out: &out}
	r.fuzz("./fuzzy", "2000x")
	got := out.String()
	t.Log(got)
	if want := []string{"fuzz ./fuzzy FuzzFinds"}; r.passed != 1 || strings.Join(r.failures, "|") != strings.Join(want, "|") {
		t.Errorf("passed %d, failures %q; want 1 and %q", r.passed, r.failures, want)
	}
	for _, s := range []string{"ok   fuzz ./fuzzy FuzzFine (2000x)", "FAIL fuzz ./fuzzy FuzzFinds (2000x)", "input of", "testdata/fuzz/FuzzFinds/"} {
		if !strings.Contains(got, s) {
			t.Errorf("output lacks %q", s)
		}
	}
	if crashers, _ := filepath.Glob(filepath.Join(dir, "fuzzy", "testdata", "fuzz", "FuzzFinds", "*")); len(crashers) != 1 {
		t.Errorf("crashers written: %q, want one under fuzzy/testdata/fuzz/FuzzFinds", crashers)
	}
}

// The fuzz binary has the module's own packages instrumented (not the
// whole dependency tree, as go test -fuzz builds it): the mutator is
// guided by the coverage of the code under test, and finds an input that
// blind mutation would not (testdata/sample/guided).
func TestFuzzIsGuidedByTheModulesCoverage(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/sample")); err != nil {
		t.Fatal(err)
	}
	// Inputs that an earlier run found interesting (kept under
	// $GOCACHE/fuzz as go test -fuzz keeps them) would find it unguided.
	cache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(strings.TrimSpace(string(cache)), "fuzz", "sample", "guided")); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r := &runner{ctx: context.Background(), dir: dir, out: &out}
	r.fuzz("./guided", "500000x")
	if got := out.String(); !strings.Contains(got, `guided to "fz!"`) || strings.Join(r.failures, "|") != "fuzz ./guided FuzzGuided" {
		t.Errorf("failures %q, output:\n%s\nwant FuzzGuided to find its input", r.failures, got)
	}
}

// After the vet step, go test does not vet again (-vet=off): a package
// whose test file go test's own vet refuses fails without the vet step
// and runs its tests after it (the vet step reported it).
func TestVettedPackagesSkipGoTestsVet(t *testing.T) {
	var out strings.Builder
	r := &runner{ctx: context.Background(), dir: "testdata/sample", out: &out}
	r.tests([]string{"./vetbad"}, 1, false)
	if len(r.failures) != 1 || r.passed != 0 {
		t.Errorf("without the vet step: passed %d, failures %q; want go test's vet to fail it\n%s", r.passed, r.failures, out.String())
	}
	out.Reset()
	r = &runner{ctx: context.Background(), dir: "testdata/sample", out: &out, vetted: true}
	r.tests([]string{"./vetbad"}, 1, false)
	if len(r.failures) != 0 || r.passed != 1 {
		t.Errorf("after the vet step: passed %d, failures %q; want the test run without vet\n%s", r.passed, r.failures, out.String())
	}
}
