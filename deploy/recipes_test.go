package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// These tests run the shipped recipes' command lines against the binary
// the Dockerfile builds, with their environment, paths inside the image or
// the host mapped to the checkout's files and a temporary state directory
// (issue 30: the image's CMD exited 2, and the units and manifests passed
// one --source, so a comma list of DLQs failed).

// pathMap rewrites the paths a recipe names to where they are here,
// longest first.
type pathMap [][2]string

func (m pathMap) apply(s string) string {
	sort.Slice(m, func(i, j int) bool { return len(m[i][0]) > len(m[j][0]) })
	for _, p := range m {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	return s
}

// samples are two of the checkout's sample DLQs, read and never written
// (no target is given, so nothing is replayed or written back).
func samples(t *testing.T) (spec string, entries int) {
	t.Helper()
	bin := dockerBuild(t)
	var specs []string
	for _, s := range []string{"jsonl:../testdata/jsonl/entries.jsonl", "cordum:../testdata/cordum/dlq.jsonl"} {
		out, err := exec.Command(bin, "plan", "--rules", "../rules.yaml", "--policies", "../policies", "--source", s, "-o", "json").Output()
		if err != nil {
			t.Fatalf("plan %s: %v", s, err)
		}
		var rows []json.RawMessage
		if err := json.Unmarshal(out, &rows); err != nil {
			t.Fatal(err)
		}
		entries += len(rows)
		abs, err := filepath.Abs(strings.SplitN(s, ":", 2)[1])
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, strings.SplitN(s, ":", 2)[0]+":"+abs)
	}
	return strings.Join(specs, ","), entries
}

// recipeEnv is the environment a recipe's process gets: this one's without
// any REPLAYCTL_ setting, plus the recipe's.
func recipeEnv(vars map[string]string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "REPLAYCTL_") {
			env = append(env, e)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("%s: not KEY=VALUE: %q", path, l)
		}
		vars[k] = v
	}
	return vars
}

func execStart(t *testing.T, unit string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("systemd", unit))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/replayctl (.*)$`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s: no ExecStart=/usr/local/bin/replayctl", unit)
	}
	if bytes.Contains(m[1], []byte("${")) {
		t.Errorf("%s: ExecStart expands %s; systemd splits an expanded ${VAR} into one word, so a comma list must reach replayctl through the environment", unit, m[1])
	}
	return strings.Fields(string(m[1]))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serveUntilARun starts serve, waits until its first scheduled run
// succeeded (read from /metrics), stops it with SIGTERM as a service
// manager would and returns the metrics it served.
func serveUntilARun(t *testing.T, bin, dir string, args, env []string, addr string) string {
	t.Helper()
	var logs bytes.Buffer
	c := exec.Command(bin, args...)
	c.Dir, c.Env = dir, env
	c.Stdout, c.Stderr = &logs, &logs
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Process.Kill()
			<-exited
		}
	}()
	client := &http.Client{Timeout: 2 * time.Second}
	var metrics string
	for i := 0; ; i++ {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("replayctl %s exited: %v\n%s", strings.Join(args, " "), err, logs.String())
		default:
		}
		if i == 600 {
			t.Fatalf("replayctl %s: no successful run after 60s\n%s\n%s", strings.Join(args, " "), metrics, logs.String())
		}
		if resp, err := client.Get("http://" + addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			metrics = string(b)
			if strings.Contains(metrics, "\nreplayctl_reconcile_runs_total{result=\"succeeded\"} 1\n") {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("serve after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("serve did not stop 30s after SIGTERM\n%s", logs.String())
	}
	return metrics
}

// TestDockerCmdServes runs the image's default command: ENTRYPOINT and
// CMD with the image's ENV, each path the final stage COPYs mapped to its
// source in the checkout and the state volume to a temporary directory.
func TestDockerCmdServes(t *testing.T) {
	bin := dockerBuild(t)
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := regexp.MustCompile(`(?m)^FROM `).Split(string(df), -1)
	final := stages[len(stages)-1]
	state := t.TempDir()
	paths := pathMap{{"/var/lib/replayctl", state}}
	env := map[string]string{}
	var cmd []string
	workdir := ""
	for _, l := range strings.Split(final, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "COPY":
			var srcs []string
			for _, a := range f[1:] {
				if !strings.HasPrefix(a, "--") {
					srcs = append(srcs, a)
				}
			}
			if strings.Contains(l, "--from=") {
				continue // the binary: the one dockerBuild built
			}
			dst := srcs[len(srcs)-1]
			srcs = srcs[:len(srcs)-1]
			for _, s := range srcs {
				abs, err := filepath.Abs(filepath.Join("..", s))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(abs); err != nil {
					t.Errorf("Dockerfile copies %s, which the checkout lacks", s)
				}
				switch {
				case strings.HasSuffix(s, "/"):
					paths = append(paths, [2]string{strings.TrimSuffix(dst, "/"), abs})
				case strings.HasSuffix(dst, "/"):
					paths = append(paths, [2]string{dst + filepath.Base(s), abs})
				default:
					paths = append(paths, [2]string{dst, abs})
				}
			}
		case "ENV":
			k, v, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(l, "ENV")), "=")
			env[k] = v
		case "WORKDIR":
			workdir = f[1]
		case "CMD":
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(l, "CMD"))), &cmd); err != nil {
				t.Fatalf("CMD is not a JSON array: %v", err)
			}
		}
	}
	if len(cmd) == 0 || cmd[0] != "serve" {
		t.Fatalf("the image's CMD is %q, want serve", cmd)
	}
	if !strings.Contains(env["REPLAYCTL_SOURCE"], ",") {
		t.Errorf("the image's REPLAYCTL_SOURCE %q is one DLQ; the samples are several", env["REPLAYCTL_SOURCE"])
	}
	addr := freeAddr(t)
	var args []string
	for _, a := range cmd {
		args = append(args, strings.ReplaceAll(paths.apply(a), "0.0.0.0:8080", addr))
	}
	for k, v := range env {
		env[k] = paths.apply(v)
	}
	metrics := serveUntilARun(t, bin, paths.apply(workdir), args, recipeEnv(env), addr)
	for _, want := range []string{"replayctl_build_info{", "replayctl_reconcile_first_due_timestamp_seconds ", "replayctl_reconcile_last_success_timestamp_seconds ", `replayctl_entries_ingested_total `} {
		if !strings.Contains(metrics, "\n"+want) {
			t.Errorf("the image's serve exports no %s", want)
		}
	}
	if strings.Contains(metrics, "\nreplayctl_entries_ingested_total 0\n") {
		t.Error("the image's serve read no sample entry")
	}
}

// TestSystemdServeTakesSeveralSources runs replayctl.service's ExecStart
// with the env file, its REPLAYCTL_SOURCE a comma list of two samples.
func TestSystemdServeTakesSeveralSources(t *testing.T) {
	bin := dockerBuild(t)
	spec, n := samples(t)
	vars := readEnvFile(t, "systemd/replayctl.env")
	if !strings.Contains(vars["REPLAYCTL_SOURCE"], ",") {
		t.Errorf("replayctl.env's REPLAYCTL_SOURCE %q shows one DLQ; show how to give several", vars["REPLAYCTL_SOURCE"])
	}
	state := t.TempDir()
	paths := pathMap{{"/etc/replayctl/rules.yaml", abs(t, "../rules.yaml")}, {"/etc/replayctl/policies", abs(t, "../policies")},
		{"/etc/replayctl/approvers.yaml", abs(t, "../approvers.yaml")}, {"/var/lib/replayctl", state}}
	var args []string
	for _, a := range execStart(t, "replayctl.service") {
		args = append(args, paths.apply(a))
	}
	addr := freeAddr(t)
	vars["REPLAYCTL_SOURCE"], vars["REPLAYCTL_ADDR"] = spec, addr
	vars["REPLAYCTL_METRICS_FILE"] = filepath.Join(state, "ignored.prom") // reconcile's, not serve's
	metrics := serveUntilARun(t, bin, state, args, recipeEnv(vars), addr)
	if want := fmt.Sprintf("\nreplayctl_entries_ingested_total %d\n", n); !strings.Contains(metrics, want) {
		t.Errorf("serve did not read both sources (%d entries):\n%s", n, grep(metrics, "ingested"))
	}
}

// TestSystemdReconcileTakesSeveralSourcesAndWritesMetrics runs
// replayctl-reconcile.service's ExecStart with the env file: several
// sources, and the textfile metrics the shipped alerts read.
func TestSystemdReconcileTakesSeveralSourcesAndWritesMetrics(t *testing.T) {
	bin := dockerBuild(t)
	spec, n := samples(t)
	unit, err := os.ReadFile("systemd/replayctl-reconcile.service")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^SuccessExitStatus=.*\b4\b`).Find(unit); m != nil {
		t.Errorf("%s: exit 4 (replays failed) succeeds here but fails the CronJob's Job", m)
	}
	vars := readEnvFile(t, "systemd/replayctl.env")
	if vars["REPLAYCTL_METRICS_FILE"] == "" {
		t.Error("replayctl.env sets no REPLAYCTL_METRICS_FILE: the timer's runs write no metrics")
	}
	state := t.TempDir()
	paths := pathMap{{"/etc/replayctl/rules.yaml", abs(t, "../rules.yaml")}, {"/etc/replayctl/policies", abs(t, "../policies")},
		{"/etc/replayctl/approvers.yaml", abs(t, "../approvers.yaml")}, {"/var/lib/replayctl", state}}
	var args []string
	for _, a := range execStart(t, "replayctl-reconcile.service") {
		args = append(args, paths.apply(a))
	}
	prom := filepath.Join(state, "textfile", "replayctl.prom")
	if err := os.MkdirAll(filepath.Dir(prom), 0o755); err != nil {
		t.Fatal(err)
	}
	vars["REPLAYCTL_SOURCE"], vars["REPLAYCTL_METRICS_FILE"] = spec, prom
	c := exec.Command(bin, args...)
	c.Dir, c.Env = state, recipeEnv(vars)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("replayctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if want := fmt.Sprintf("decisions recorded: %d;", n); !strings.Contains(string(out), want) {
		t.Errorf("the run did not decide both sources' %d entries:\n%s", n, out)
	}
	data, err := os.ReadFile(prom)
	if err != nil {
		t.Fatalf("no metrics file: %v", err)
	}
	for _, want := range []string{"replayctl_reconcile_last_success_timestamp_seconds ", "replayctl_reconcile_first_due_timestamp_seconds ",
		`replayctl_reconcile_runs_total{result="succeeded"} 1`, fmt.Sprintf("replayctl_entries_ingested_total %d", n)} {
		if !strings.Contains(string(data), "\n"+want) {
			t.Errorf("metrics file lacks %s", want)
		}
	}
}

// TestCronJobTakesSeveralSourcesAndPushesMetrics runs the CronJob's
// container (args and env) with the bbolt file instead of its PostgreSQL
// secret and a Pushgateway that records what it is sent.
func TestCronJobTakesSeveralSourcesAndPushesMetrics(t *testing.T) {
	bin := dockerBuild(t)
	spec, n := samples(t)
	data, err := os.ReadFile("kubernetes/reconcile-cronjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var args []string
	vars := map[string]string{}
	walkContainers(doc, func(c map[string]any) {
		for _, a := range c["args"].([]any) {
			args = append(args, a.(string))
		}
		for _, e := range c["env"].([]any) {
			m := e.(map[string]any)
			if v, ok := m["value"].(string); ok {
				vars[m["name"].(string)] = v
			}
		}
		if img := c["image"].(string); strings.HasSuffix(img, ":latest") || !strings.ContainsAny(img, ":@") {
			t.Errorf("the CronJob's image %q floats; name a tag or a digest", img)
		}
	})
	if !strings.Contains(vars["REPLAYCTL_SOURCE"], ",") {
		t.Errorf("the CronJob's REPLAYCTL_SOURCE %q shows one DLQ; show how to give several", vars["REPLAYCTL_SOURCE"])
	}
	if vars["REPLAYCTL_PUSH_URL"] == "" {
		t.Fatal("the CronJob pushes no metrics: the shipped alerts are blind in cron mode")
	}
	var mu sync.Mutex
	var pushed []string
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		pushed = append(pushed, r.Method+" "+r.URL.Path+"\n"+string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer gw.Close()
	state := t.TempDir()
	paths := pathMap{{"/etc/replayctl/rules.yaml", abs(t, "../rules.yaml")}, {"/etc/replayctl/policies", abs(t, "../policies")},
		{"/etc/replayctl/config/approvers.yaml", abs(t, "../approvers.yaml")}}
	for i, a := range args {
		args[i] = paths.apply(a)
	}
	vars["REPLAYCTL_SOURCE"], vars["REPLAYCTL_PUSH_URL"] = spec, gw.URL
	vars["REPLAYCTL_DB"] = filepath.Join(state, "replayctl.db") // REPLAYCTL_STORE in the cluster
	c := exec.Command(bin, args...)
	c.Dir, c.Env = state, recipeEnv(vars)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("replayctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if want := fmt.Sprintf("decisions recorded: %d;", n); !strings.Contains(string(out), want) {
		t.Errorf("the run did not decide both sources' %d entries:\n%s", n, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pushed) != 1 || !strings.Contains(pushed[0], "/metrics/job/replayctl_reconcile") ||
		!strings.Contains(pushed[0], "replayctl_reconcile_last_success_timestamp_seconds") {
		t.Errorf("pushed %d time(s): %q", len(pushed), pushed)
	}
}

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
