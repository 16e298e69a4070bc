// Command testrun is what `make test` (and so .ci/run) runs: gofmt, go
// vet, every package's tests and a short run of every fuzz target. It
// prints each package's result as the package finishes, the output of
// every failing test, and ends with one line, "N passed, N failed",
// counting test cases (tests and subtests; gofmt, vet, a package that
// does not build and each fuzz target count as one case each). It exits 1
// when anything failed.
//
// Packages (and each fuzz package's targets) run in a pool of -p
// processes, the slowest first (see slowFirst), so one long package does
// not hold back every other result:
// `go test ./...` prints packages in import-path order, and
// cmd/replayctl, the first and slowest, would print nothing for minutes.
//
//	go run ./scripts/testrun [-fuzztime 20000x] [-race=false] [-only gofmt,vet,test,fuzz] [packages]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// slowFirst are started before the rest, in this order (measured with
// `go test -json` on the shared 2-core machine; "fuzz ./pkg" is that
// package's fuzz smoke, whose first target builds an instrumented test
// binary): the total then stays near the slowest job instead of the sum
// of the last two.
var slowFirst = []string{"./cmd/replayctl", "./internal/server", "./deploy", "./internal/replay", "./internal/replay (no -race)",
	"./internal/benchmark (no -race)", "fuzz ./internal/server", "./internal/store/postgres", "./internal/store/bolt", "./internal/store/bolt (no -race)",
	"fuzz ./internal/source", "fuzz ./internal/store", "./internal/source", "fuzz ./internal/triage"}

// withoutRace are tests that run in a job of their own without the race
// detector, and that the package's race run skips (-skip): each starts
// its test binary again as worker processes and SIGKILLs them at random
// moments, so under -race every worker is a race-instrumented process
// deciding and replaying thousands of entries (TestFourWorkersSurviveSIGKILL
// was 49 s of internal/replay's 134 s on the idle 2-core machine). The
// tests keep their sizes, kill counts and checks; the reconcile, claim and
// prune code their workers run stays under the race detector in the
// package's in-process tests. A pattern that matches no test fails the
// run, so a rename cannot drop a test silently. The reconcile and
// single/bulk replay crash tests (TestCrashChild's parents) are the same
// kind: 6.7 s of CPU and 22 s of wall under -race, 2.1 s and 10 s
// without, with the same 50 and 6 kills, as many landing mid-dispatch.
// internal/benchmark's smoke tests share one quick run of the whole
// harness (quickRun): reconcile, the store, PostgreSQL workers, the
// brokers, each of which its own package tests under -race; here they only
// show that every row still measures something. 37 s under -race, 12 s
// without, on the idle 2-core machine. The harness's own concurrency
// (TestPairedAlternatesAndTakesMedians) stays in the race run.
var withoutRace = map[string]string{
	"./internal/benchmark":  `^(TestHarnessSmoke|TestBacktestRowSmoke|TestPGReadRows|TestPruneRowsSmoke|TestReadsRows|TestSizeRowAndBreakdown)$`,
	"./internal/replay":     `^(TestFourWorkersSurviveSIGKILL|TestBrokerReconcileSurvivesSIGKILL|TestCrashReconcileSurvivesSIGKILL|TestCrashSingleAndBulkReplaysSurviveSIGKILL)$`,
	"./internal/store/bolt": `^TestPruneSurvivesSIGKILL$`,
}

// raceExitSleep is GORACE's atexit_sleep_ms for every process the tests
// start: the race runtime sleeps that long before any race-instrumented
// process exits, 1 s by default (go.dev/doc/articles/race_detector). Each
// CLI story command is the race-built test binary run again (about 490
// commands, twice: locally and through serve), as are the crash tests'
// workers, so the default sleeps were most of cmd/replayctl's 139 s. 10 ms
// still lets a report in progress finish, as testscript's own comment on
// GORACE suggests; a GORACE that sets atexit_sleep_ms is kept.
const raceExitSleep = "atexit_sleep_ms=10"

// raceEnv is the environment of a go test -race process.
func raceEnv() []string {
	g := os.Getenv("GORACE")
	if strings.Contains(g, "atexit_sleep_ms") {
		return os.Environ()
	}
	return append(os.Environ(), "GORACE="+strings.TrimSpace(g+" "+raceExitSleep))
}

// fuzzPackages are the packages holding fuzz targets (the decoders, the
// stored-record codecs, the rules loader, the HTTP API's request decoding,
// the failure signature, the policy's invariant...), found by reading the
// test files, so a target added anywhere is in the smoke run: a fixed list
// missed internal/group's when it was added. A failing target's output
// (and the crasher it wrote under testdata/fuzz) is shown.
func fuzzPackages() []string {
	var pkgs []string
	_ = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(b, []byte("\nfunc Fuzz")) {
			return nil
		}
		if pkg := "./" + filepath.ToSlash(filepath.Dir(path)); !slices.Contains(pkgs, pkg) {
			pkgs = append(pkgs, pkg)
		}
		return nil
	})
	slices.Sort(pkgs)
	return pkgs
}

func main() {
	fuzztime := flag.String("fuzztime", "20000x", "budget of each fuzz target: a count of executions (Go 1.26's coordinator can fail a -fuzztime duration with no crasher, go.dev/issue/75804)")
	only := flag.String("only", "gofmt,vet,test,fuzz", "the steps to run, a comma list")
	race := flag.Bool("race", true, "run the tests with the race detector")
	// As many processes as CPUs. One more (-p 3 on the 2-core machine)
	// took 4m03s against 4m39s in a warm clone but only 4m52s against
	// 4m56s from a clean clone, and under its load the PostgreSQL lease
	// test (TestSharedWindowKeepsTheLeaseWhileAnEntryWaitsToSend, a 1.5 s
	// lease) lost a claim once (2026-11-27): not worth it.
	procs := flag.Int("p", runtime.NumCPU(), "go test processes at once")
	timeout := flag.Duration("timeout", 30*time.Minute, "limit for the whole run (each package's go test also stops at its own 10m default)")
	flag.Parse()
	pkgs := flag.Args()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	r := &runner{out: os.Stdout, ctx: ctx, noRace: withoutRace}
	start := time.Now()
	steps := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		switch s = strings.TrimSpace(s); s {
		case "gofmt", "vet", "test", "fuzz":
			steps[s] = true
		default:
			fmt.Fprintf(os.Stderr, "testrun: -only: unknown step %q (want gofmt, vet, test, fuzz)\n", s)
			os.Exit(2)
		}
	}
	if steps["gofmt"] {
		r.gofmt()
	}
	if steps["vet"] {
		r.vet(pkgs)
		r.vetted = true // failed or not: its findings are reported once
	}
	// Tests and fuzz targets share one pool: most tests wait on fsyncs,
	// servers and child processes, which leaves the cores to a fuzz build.
	var jobs []job
	if steps["test"] {
		jobs = append(jobs, r.testJobs(pkgs, *race)...)
	}
	if steps["fuzz"] {
		for _, p := range fuzzPackages() {
			jobs = append(jobs, job{name: "fuzz " + p, run: func() { r.fuzz(p, *fuzztime) }})
		}
	}
	slices.SortStableFunc(jobs, func(a, b job) int { return rank(a.name) - rank(b.name) })
	r.pool(jobs, *procs)
	took := fmt.Sprintf("took %s, %s of CPU", time.Since(start).Round(time.Second), r.cpu.Round(time.Second))
	if r.skipped > 0 {
		fmt.Fprintf(r.out, "%d skipped; %s\n", r.skipped, took)
	} else {
		fmt.Fprintln(r.out, took)
	}
	if len(r.failures) > 0 {
		fmt.Fprintf(r.out, "failed: %s\n", strings.Join(r.failures, ", "))
	}
	fmt.Fprintf(r.out, "%d passed, %d failed\n", r.passed, len(r.failures))
	if len(r.failures) > 0 {
		os.Exit(1)
	}
}

type runner struct {
	ctx context.Context
	dir string     // where the commands run; "" is the working directory
	mu  sync.Mutex // guards out and the counts while packages run at once
	out io.Writer
	// noRace: package -> its tests that run without -race (withoutRace).
	noRace map[string]string
	// vetted: go vet has checked every package (the vet step), so go test
	// runs without its own vet pass (-vet=off). go test's default vet
	// (atomic, bool, buildtags, directive, errorsas, ifaceassert, nilfunc,
	// printf, stringintconv, tests) is a subset of go vet's, and on a clean
	// clone it analyses every package again: 80.6 s of CPU for building
	// every test binary after go vet ./..., 72.8 s with -vet=off.
	vetted bool
	// cpu is the user and system CPU of the commands run so far, each
	// with the children it waited for (a go test process's test binary
	// and the processes its tests start and wait for): on a machine
	// shared with other work it says what a change saves where wall time
	// cannot.
	cpu time.Duration

	passed, skipped int
	failures        []string
}

func (r *runner) pass(n int) {
	r.passed += n
}

func (r *runner) fail(name string) {
	r.failures = append(r.failures, name)
}

// command runs a child bounded by the run's deadline, in its own process
// group so that a cancelled run ends the test binaries too.
func (r *runner) command(name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(r.ctx, name, args...)
	c.Dir = r.dir
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 10 * time.Second
	return c
}

func (r *runner) gofmt() {
	files, err := r.command("git", "ls-files", "-co", "--exclude-standard", "*.go").Output()
	if err != nil {
		fmt.Fprintf(r.out, "FAIL gofmt: list the Go files: %v\n", err)
		r.fail("gofmt")
		return
	}
	var present []string
	for _, f := range strings.Fields(string(files)) {
		if _, err := os.Stat(f); err == nil {
			present = append(present, f)
		}
	}
	out, err := r.command("gofmt", append([]string{"-l"}, present...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		fmt.Fprintf(r.out, "FAIL gofmt would change:\n%s", out)
		if err != nil {
			fmt.Fprintln(r.out, err)
		}
		r.fail("gofmt")
		return
	}
	fmt.Fprintf(r.out, "ok   gofmt (%d files)\n", len(present))
	r.pass(1)
}

func (r *runner) vet(pkgs []string) {
	if len(pkgs) == 0 {
		pkgs = []string{"./..."}
	}
	t := time.Now()
	c := r.command("go", append([]string{"vet"}, pkgs...)...)
	out, err := c.CombinedOutput()
	r.cpu += cpuOf(c)
	if err != nil {
		fmt.Fprintf(r.out, "FAIL go vet:\n%s%v\n", out, err)
		r.fail("go vet")
		return
	}
	fmt.Fprintf(r.out, "ok   go vet %s, %.1fs CPU\n", since(t), cpuOf(c).Seconds())
	r.pass(1)
}

// job is one go test process (or one package's fuzz targets, in turn).
type job struct {
	name string
	run  func()
}

// testJobs lists every package with tests (or the packages given), one
// job each.
func (r *runner) testJobs(pkgs []string, race bool) []job {
	if len(pkgs) == 0 {
		out, err := r.command("go", "list", "-f", "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}", "./...").Output()
		if err != nil {
			r.report(func() { fmt.Fprintf(r.out, "FAIL go list: %v\n", err); r.fail("go list") })
			return nil
		}
		mod, err := r.command("go", "list", "-m").Output()
		if err != nil {
			r.report(func() { fmt.Fprintf(r.out, "FAIL go list -m: %v\n", err); r.fail("go list") })
			return nil
		}
		prefix := strings.TrimSpace(string(mod))
		for _, p := range strings.Fields(string(out)) {
			pkgs = append(pkgs, "."+strings.TrimPrefix(p, prefix))
		}
	}
	var jobs []job
	for _, p := range pkgs {
		if re := r.noRace[p]; race && re != "" {
			jobs = append(jobs, job{name: p, run: func() { r.testPackage(p, p, true, "-skip", re) }},
				job{name: p + noRaceSuffix, run: func() { r.testPackage(p+noRaceSuffix, p, false, "-run", re) }})
			continue
		}
		jobs = append(jobs, job{name: p, run: func() { r.testPackage(p, p, race) }})
	}
	return jobs
}

// tests runs the packages' jobs alone (the runner's own test).
func (r *runner) tests(pkgs []string, procs int, race bool) {
	r.pool(r.testJobs(pkgs, race), procs)
}

// pool runs the jobs, procs at a time, in their order.
func (r *runner) pool(jobs []job, procs int) {
	work := make(chan job)
	var wg sync.WaitGroup
	for range max(procs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				j.run()
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
}

// report runs fn with the output and the counts to itself.
func (r *runner) report(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn()
}

func rank(pkg string) int {
	if i := slices.Index(slowFirst, pkg); i >= 0 {
		return i
	}
	return len(slowFirst)
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action      string
	Package     string
	ImportPath  string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// noRaceSuffix names a package's job of withoutRace tests.
const noRaceSuffix = " (no -race)"

// testPackage runs one package's tests (with extra go test flags) and
// reports them, as name, once it ends.
func (r *runner) testPackage(name, pkg string, race bool, extra ...string) {
	args := []string{"test", "-count=1", "-json"}
	if r.vetted {
		args = append(args, "-vet=off")
	}
	if race {
		args = append(args, "-race")
	}
	c := r.command("go", append(append(args, extra...), pkg)...)
	if race {
		c.Env = raceEnv()
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	stdout, err := c.StdoutPipe()
	if err != nil {
		r.mu.Lock()
		fmt.Fprintf(r.out, "FAIL %s: %v\n", name, err)
		r.fail(name)
		r.mu.Unlock()
		return
	}
	if err := c.Start(); err != nil {
		r.mu.Lock()
		fmt.Fprintf(r.out, "FAIL %s: %v\n", name, err)
		r.fail(name)
		r.mu.Unlock()
		return
	}
	res := readEvents(stdout)
	waitErr := c.Wait()
	cpu := cpuOf(c)

	r.mu.Lock()
	defer r.mu.Unlock()
	r.cpu += cpu
	r.passed += res.passed
	r.skipped += res.skipped
	for _, f := range res.failed {
		fmt.Fprintf(r.out, "--- FAIL: %s %s\n%s", name, f.name, indent(f.output))
		r.fail(name + " " + f.name)
	}
	switch {
	case res.buildFailed:
		fmt.Fprintf(r.out, "FAIL %s [build failed]\n%s%s", name, indent(res.build.String()), indent(stderr.String()))
		r.fail(name + " [build]")
	case res.pkgAction == "fail" && len(res.failed) == 0:
		// The package failed outside any test (TestMain, a panic, a
		// timeout, a test binary that would not start): its own output
		// says why.
		fmt.Fprintf(r.out, "FAIL %s %.1fs\n%s%s", name, res.elapsed, indent(res.pkgOutput.String()), indent(stderr.String()))
		r.fail(name)
	case res.pkgAction == "fail":
		fmt.Fprintf(r.out, "FAIL %s %.1fs (%d passed, %d failed)\n", name, res.elapsed, res.passed, len(res.failed))
	case res.pkgAction == "" || waitErr != nil:
		fmt.Fprintf(r.out, "FAIL %s: go test ended without a result (%v)\n%s", name, waitErr, indent(stderr.String()))
		r.fail(name)
	case strings.HasSuffix(name, noRaceSuffix) && res.passed+res.skipped == 0:
		fmt.Fprintf(r.out, "FAIL %s: %s matches no test (scripts/testrun withoutRace)\n", name, r.noRace[pkg])
		r.fail(name)
	default:
		fmt.Fprintf(r.out, "ok   %s %.1fs (%d passed%s), %.1fs CPU%s\n", name, res.elapsed, res.passed, skippedNote(res.skipped), cpu.Seconds(), slowNote(res))
	}
}

// slowNote names the slowest tests of a package that took over
// slowPackage, where make test's time goes.
func slowNote(res *pkgResult) string {
	if res.elapsed < slowPackage || len(res.slowest) == 0 {
		return ""
	}
	var parts []string
	for _, t := range res.slowest[:min(3, len(res.slowest))] {
		parts = append(parts, fmt.Sprintf("%s %.0fs", t.name, t.elapsed))
	}
	return "; slowest: " + strings.Join(parts, ", ")
}

// slowPackage: a package this slow names its slowest tests.
const slowPackage = 30.0

// cpuOf is the user and system CPU of an ended command, with the
// children it waited for (wait4 reports both).
func cpuOf(c *exec.Cmd) time.Duration {
	if c.ProcessState == nil {
		return 0
	}
	return c.ProcessState.UserTime() + c.ProcessState.SystemTime()
}

func skippedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d skipped", n)
}

type failedTest struct{ name, output string }

type timedTest struct {
	name    string
	elapsed float64
}

type pkgResult struct {
	passed, skipped int
	slowest         []timedTest // top-level tests, slowest first
	failed          []failedTest
	pkgAction       string // pass, fail or skip: the package's own result
	elapsed         float64
	buildFailed     bool
	build           strings.Builder // the compiler's output
	pkgOutput       strings.Builder // output outside any test
}

// readEvents reads one go test -json stream. Every test and subtest that
// passes or fails is one case; a test's output is kept until it ends and
// shown only when it failed.
func readEvents(rd io.Reader) *pkgResult {
	res := &pkgResult{}
	outputs := map[string]*strings.Builder{}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			// Not an event: go itself reporting something.
			res.pkgOutput.WriteString(sc.Text() + "\n")
			continue
		}
		switch e.Action {
		case "build-output":
			res.build.WriteString(e.Output)
		case "build-fail":
			res.buildFailed = true
		case "output":
			if e.Test == "" {
				res.pkgOutput.WriteString(e.Output)
				continue
			}
			if isNoise(e.Output) {
				continue
			}
			b := outputs[e.Test]
			if b == nil {
				b = &strings.Builder{}
				outputs[e.Test] = b
			}
			b.WriteString(e.Output)
		case "pass", "fail", "skip":
			if e.Test == "" {
				res.pkgAction = e.Action
				res.elapsed = e.Elapsed
				if e.FailedBuild != "" {
					res.buildFailed = true
				}
				continue
			}
			if !strings.Contains(e.Test, "/") {
				res.slowest = append(res.slowest, timedTest{e.Test, e.Elapsed})
			}
			switch e.Action {
			case "pass":
				res.passed++
			case "skip":
				res.skipped++
			case "fail":
				out := ""
				if b := outputs[e.Test]; b != nil {
					out = b.String()
				}
				res.failed = append(res.failed, failedTest{e.Test, out})
			}
			delete(outputs, e.Test)
		}
	}
	if err := sc.Err(); err != nil {
		res.pkgOutput.WriteString("reading go test -json: " + err.Error() + "\n")
		res.pkgAction = "fail"
	}
	slices.SortStableFunc(res.slowest, func(a, b timedTest) int {
		switch {
		case a.elapsed > b.elapsed:
			return -1
		case a.elapsed < b.elapsed:
			return 1
		}
		return 0
	})
	return res
}

// isNoise: the === lines say when a test ran or paused, which a failing
// test's output does not need.
func isNoise(line string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("    " + l)
		}
	}
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

// fuzz runs the fuzz targets of one package in turn, each for a count of
// executions. The package's fuzz-instrumented test binary is built once
// (go test -c -fuzz) and run for each target as go test -fuzz runs it:
// in the package's directory (testdata/fuzz is its seed corpus, and where
// a crasher is written) with the same cache of generated inputs. go test
// -fuzz links the binary again for every target, and go test -list links
// an uninstrumented one to list them: 20 links of 3 to 4 s of CPU each for
// the 12 targets of 8 packages, against 8 now.
func (r *runner) fuzz(pkg, budget string) {
	failed := func(what string, err error, out []byte) {
		r.report(func() {
			fmt.Fprintf(r.out, "FAIL fuzz %s: %s: %v\n%s", pkg, what, err, indent(tail(string(out), 40)))
			r.fail("fuzz " + pkg)
		})
	}
	info, err := r.command("go", "list", "-f", "{{.ImportPath}}\n{{.Dir}}\n{{.Module.Path}}", pkg).Output()
	lines := strings.Split(strings.TrimSpace(string(info)), "\n")
	if err != nil || len(lines) != 3 {
		failed("go list", err, info)
		return
	}
	importPath, dir, module := lines[0], lines[1], lines[2]
	cache, err := r.command("go", "env", "GOCACHE").Output()
	if err != nil || strings.TrimSpace(string(cache)) == "" || strings.TrimSpace(string(cache)) == "off" {
		failed("go env GOCACHE", err, cache)
		return
	}
	// As cmd/go does: $GOCACHE/fuzz/<import path> keeps the inputs that
	// found new coverage, run again (baseline coverage) before fuzzing.
	fuzzCache := filepath.Join(strings.TrimSpace(string(cache)), "fuzz", importPath)
	tmp, err := os.MkdirTemp("", "testrun-fuzz-")
	if err != nil {
		failed("temporary directory", err, nil)
		return
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, filepath.Base(dir)+".test")
	// go test -c -fuzz instruments every package of the binary, OPA and
	// the standard library included: a second compile of the whole
	// dependency tree, shared with nothing else, whose coverage counters
	// also slow every execution. Only the module's own packages are
	// instrumented here, with the compiler flag that -fuzz sets; the
	// rest is the plain build that vet and the tests without -race
	// compile anyway. The coverage that guides the mutator is the code
	// under test's (TestFuzzIsGuidedByTheModulesCoverage). Instrumenting
	// encoding/json too (which several targets compare with) cost 75 s
	// more CPU from an empty cache: every package above it compiles again.
	instrument := []string{"-gcflags=" + module + "/...=" + fuzzInstrument}
	build := r.command("go", append(append([]string{"test", "-c"}, instrument...), "-o", bin, pkg)...)
	out, err := build.CombinedOutput()
	r.report(func() { r.cpu += cpuOf(build) })
	if err != nil {
		failed("build", err, out)
		return
	}
	list := r.command(bin, "-test.list", "^Fuzz")
	list.Dir = dir
	out, err = list.Output()
	if err != nil {
		failed("list the targets", err, out)
		return
	}
	for _, t := range strings.Fields(string(out)) {
		if !strings.HasPrefix(t, "Fuzz") {
			continue
		}
		start := time.Now()
		c := r.command(bin, "-test.paniconexit0", "-test.fuzzcachedir="+fuzzCache,
			"-test.run", "^$", "-test.fuzz", "^"+t+"$", "-test.fuzztime", budget)
		c.Dir = dir
		out, err := c.CombinedOutput()
		r.report(func() {
			r.cpu += cpuOf(c)
			if err != nil {
				fmt.Fprintf(r.out, "FAIL fuzz %s %s (%s)\n%s", pkg, t, budget, indent(tail(string(out), 40)))
				r.fail("fuzz " + pkg + " " + t)
				return
			}
			fmt.Fprintf(r.out, "ok   fuzz %s %s (%s) %s, %.1fs CPU\n", pkg, t, budget, since(start), cpuOf(c).Seconds())
			r.pass(1)
		})
	}
}

// fuzzInstrument is the compiler flag go test -fuzz builds with
// (cmd/go/internal/work.FuzzInstrumentFlags): libFuzzer-style coverage
// counters that the testing package's fuzzer reads.
const fuzzInstrument = "-d=libfuzzer"

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

func since(t time.Time) string {
	return fmt.Sprintf("%.1fs", time.Since(t).Seconds())
}
