// Package deploy holds the shipped deployment recipes (Dockerfile, systemd,
// Kubernetes, Prometheus alerts, Grafana); its tests check that each works
// as shipped: the units verify, the manifests' command lines parse, the
// Dockerfile's build command builds a stamped binary.
package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// need finds a tool; outside CI its absence skips the test with a message,
// in CI it fails it (.ci/run installs it).
func need(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found: CI must install it (.ci/run installs %s)", tool, pkg)
	}
	t.Skipf("%s not found: install it (apt-get install -y %s) to run this test", tool, pkg)
	return ""
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binOut  []byte
)

const stampedVersion = "v0.0.0-dockerfile-test"

// dockerBuild runs the Dockerfile's build command (the RUN line with
// CGO_ENABLED=0 go build), with its ARGs set, writing the binary to a
// temporary directory: no Docker engine runs here, but the exact flags the
// image is built with are proven to compile and stamp the version.
func dockerBuild(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		df, err := os.ReadFile("../Dockerfile")
		if err != nil {
			binErr = err
			return
		}
		m := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*)$`).FindSubmatch(df)
		if m == nil {
			t.Fatal("Dockerfile has no `RUN CGO_ENABLED=0 go build` line")
		}
		dir, err := os.MkdirTemp("", "replayctl-docker-build")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "replayctl")
		line := strings.Replace(string(m[1]), "-o /out/replayctl", "-o "+binPath, 1)
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "VERSION="+stampedVersion, "COMMIT=abc1234", "BUILD_DATE=2026-11-23T00:00:00Z")
		binOut, binErr = cmd.CombinedOutput()
	})
	if binErr != nil {
		t.Fatalf("Dockerfile build command: %v\n%s", binErr, binOut)
	}
	return binPath
}

func TestDockerfileBuildCommandStampsAStaticBinary(t *testing.T) {
	bin := dockerBuild(t)
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	var v struct{ Version, Commit, BuildDate, OPA, Bbolt string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, out)
	}
	if v.Version != stampedVersion || v.Commit != "abc1234" {
		t.Fatalf("version = %+v: -ldflags -X did not stamp the build", v)
	}
	if v.OPA == "unknown" || v.Bbolt == "unknown" {
		t.Fatalf("version = %+v: library versions missing", v)
	}
	// Static: a distroless/static image has no libc to load.
	if file, err := exec.LookPath("file"); err == nil {
		fo, _ := exec.Command(file, bin).Output()
		if !bytes.Contains(fo, []byte("statically linked")) {
			t.Errorf("binary is not static: %s", fo)
		}
	}
	df, _ := os.ReadFile("../Dockerfile")
	for _, want := range []string{"USER 65532", "FROM gcr.io/distroless/static", "AS build"} {
		if !bytes.Contains(df, []byte(want)) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

// checkArgs runs the binary with a recipe's command line and --help: cobra
// parses every flag before it prints help, so an unknown or misspelled flag
// fails here instead of at 3 a.m.
func checkArgs(t *testing.T, bin, where string, args []string) {
	t.Helper()
	out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
	if err != nil {
		t.Errorf("%s: replayctl %s: %v\n%s", where, strings.Join(args, " "), err, out)
	}
}

func TestSystemdUnitsVerify(t *testing.T) {
	bin := dockerBuild(t)
	units := []string{"replayctl.service", "replayctl-reconcile.service", "replayctl-reconcile.timer"}
	tmp := t.TempDir()
	for _, u := range units {
		data, err := os.ReadFile(filepath.Join("systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(l, "ExecStart=/usr/local/bin/replayctl "); ok {
				// systemd expands ${VAR} from the env file; any value will do here.
				rest = regexp.MustCompile(`\$\{[A-Z_]+\}`).ReplaceAllString(rest, "x:y")
				rest = strings.ReplaceAll(rest, "--addr x:y", "--addr 127.0.0.1:0")
				rest = strings.ReplaceAll(rest, "--every x:y", "--every 5m")
				checkArgs(t, bin, u, strings.Fields(rest))
			}
		}
		// systemd-analyze checks that ExecStart is executable: point it at the built binary.
		data = bytes.ReplaceAll(data, []byte("/usr/local/bin/replayctl"), []byte(bin))
		if err := os.WriteFile(filepath.Join(tmp, u), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sa := need(t, "systemd-analyze", "systemd")
	args := []string{"verify", "--man=no"}
	for _, u := range units {
		args = append(args, filepath.Join(tmp, u))
	}
	out, err := exec.Command(sa, args...).CombinedOutput()
	// Lines about the host (no such user on a build machine) are not the
	// units' fault; anything naming one of our units is.
	var bad []string
	for _, l := range strings.Split(string(out), "\n") {
		for _, u := range units {
			if strings.Contains(l, u) {
				bad = append(bad, l)
				break
			}
		}
	}
	if len(bad) > 0 || (err != nil && len(bytes.TrimSpace(out)) == 0) {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestKubernetesManifests(t *testing.T) {
	bin := dockerBuild(t)
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/kubernetes")
	}
	probes := map[string]bool{}
	kinds := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			kinds[doc["kind"].(string)] = true
			walkContainers(doc, func(c map[string]any) {
				var args []string
				for _, a := range c["args"].([]any) {
					// $(VAR) is expanded by the kubelet from env; any value will do.
					s := strings.ReplaceAll(a.(string), "$(REPLAYCTL_STORE)", "postgres://u@localhost:1/db")
					args = append(args, regexp.MustCompile(`\$\([A-Z_]+\)`).ReplaceAllString(s, "x:y"))
				}
				checkArgs(t, bin, f, args)
				for _, p := range []string{"livenessProbe", "readinessProbe"} {
					if pr, ok := c[p].(map[string]any); ok {
						probes[p+" "+pr["httpGet"].(map[string]any)["path"].(string)] = true
					}
				}
			})
		}
	}
	for _, k := range []string{"Deployment", "Service", "CronJob"} {
		if !kinds[k] {
			t.Errorf("no %s in deploy/kubernetes", k)
		}
	}
	for _, p := range []string{"livenessProbe /healthz", "readinessProbe /readyz"} {
		if !probes[p] {
			t.Errorf("serve lacks %s (have %v)", p, probes)
		}
	}
}

// walkContainers calls fn for every container spec in a manifest.
func walkContainers(v any, fn func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		if cs, ok := x["containers"].([]any); ok {
			for _, c := range cs {
				fn(c.(map[string]any))
			}
			return
		}
		for _, e := range x {
			walkContainers(e, fn)
		}
	case []any:
		for _, e := range x {
			walkContainers(e, fn)
		}
	}
}

// The shipped alerts load (promtool check rules), fire and stay silent as
// alerts_test.yaml says (promtool test rules), and each names a severity, a
// summary and a runbook section that exists in docs/runbook.md.
func TestAlertRules(t *testing.T) {
	data, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert       string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	tested, _ := os.ReadFile("prometheus/alerts_test.yaml")
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			n++
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: no summary", r.Alert)
			}
			if want := "https://github.com/replayctl/replayctl/blob/main/docs/runbook.md#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !bytes.Contains(runbook, []byte("\n## "+r.Alert+"\n")) {
				t.Errorf("%s: no section `## %s` in docs/runbook.md", r.Alert, r.Alert)
			}
			// Every alert has a case where it fires and one where it must not.
			if c := strings.Count(string(tested), "alertname: "+r.Alert+","); c == 0 {
				t.Errorf("%s: no silent case in alerts_test.yaml", r.Alert)
			}
			if !strings.Contains(string(tested), "alertname: "+r.Alert+"\n") {
				t.Errorf("%s: no firing case in alerts_test.yaml", r.Alert)
			}
		}
	}
	if n < 7 {
		t.Fatalf("%d alert rules, want at least 7", n)
	}
	promtool := need(t, "promtool", "prometheus")
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
