package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/server"
)

// The story suite runs a second time with every command that has a
// remote path sent through a real `replayctl serve` (issue #17: "the CLI
// story suite runs both locally and against a serve process"). The stories
// are the same files; only the `replayctl` program differs: with
// storyRemoteEnv set it is remoteStory, which starts (or re-starts) a
// serve process for the story's state file on a free port, with a token per
// acting user, and runs the command with --server and --token. A command
// with no remote path (serve itself, tokens, rules check, a dry run, a
// reconcile with local-only flags, ...) stops the server, which holds the
// state file, and runs locally. A story that cannot run remotely at all
// starts with `[remote] skip 'why'`.

// storyRemoteEnv names the directory holding the story's server state
// (pid, address, config, tokens, a log of how each command ran). Not a
// REPLAYCTL_ variable: those are flag values.
const storyRemoteEnv = "STORY_REMOTE_STATE"

// TestScriptsRemote is TestScripts through `replayctl serve`. Every story
// that runs at least one command must send at least one through the
// server, or say why not with `[remote] skip`.
func TestScriptsRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a serve process per story; skipped with -short")
	}
	t.Parallel() // with TestScripts: both suites share -parallel's places
	var mu sync.Mutex
	ran := map[string][3]int{} // story -> {through serve, local, serve starts}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		names := slices.Sorted(func(yield func(string) bool) {
			for k := range ran {
				if !yield(k) {
					return
				}
			}
		})
		for _, n := range names {
			c := ran[n]
			t.Logf("%-32s %3d through serve, %3d local, %2d serve starts", n, c[0], c[1], c[2])
			if c[0]+c[1] > 0 && c[0] == 0 {
				t.Errorf("story %s ran %d commands, none through serve: give it a remote path or `[remote] skip 'why'`", n, c[1])
			}
		}
	})
	p := storyParams()
	p.Condition = func(cond string) (bool, error) {
		if cond == "remote" {
			return true, nil
		}
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		state, err := os.MkdirTemp("", "story-remote-")
		if err != nil {
			return err
		}
		env.Setenv(storyRemoteEnv, state)
		name := filepath.Base(env.WorkDir)
		env.Defer(func() {
			stopStoryServer(state)
			remote, local := countStoryLog(state)
			starts := 0
			if b, err := os.ReadFile(filepath.Join(state, "serve.log")); err == nil {
				starts = strings.Count(string(b), "--- serve ")
			}
			if b, err := os.ReadFile(filepath.Join(state, "log")); err == nil && env.T().Verbose() {
				env.T().Log("how each command ran:\n" + string(b))
			}
			mu.Lock()
			ran[name] = [3]int{remote, local, starts}
			mu.Unlock()
			os.RemoveAll(state)
		})
		return nil
	}
	testscript.Run(t, p)
}

// storyServer is what remoteStory keeps between the commands of a story.
type storyServer struct {
	PID  int    `json:"pid"`
	Addr string `json:"addr"`
	// Flags are the serve flags that came from the story's commands
	// (--source, --target, --probe, --approvers, --rules, --policies, --db).
	Flags map[string][]string `json:"flags"`
}

// serverFlags move from a command to the server it is sent through.
var serverFlags = map[string]bool{"source": true, "target": true, "probe": true, "approvers": true, "rules": true, "policies": true, "db": true}

// localOnlyFlags have no remote equivalent: a command using one runs locally.
var localOnlyFlags = map[string]bool{
	"dry-run": true, "limit": true, "rate": true, "lease": true, "metrics-file": true, "push-url": true,
	"max-parallel": true, "store": true, "audit-key-file": true, "policy-timeout": true, "server": true, "token": true,
	"config": true, "cpuprofile": true,
	// audit verify --archive reads the archive files where it runs.
	"archive": true,
	// a plan is kept where the state is (plan_cmd.go); runs start PLAN
	// goes through the server.
	"request-approval": true,
	// reconcile -v lists every entry; a run on the server reports totals.
	"verbose": true,
}

// remoteCommands have a remote path (the first words of the command line).
var remoteCommands = []string{
	"reconcile", "plan", "stats",
	"dlq list", "dlq show", "dlq resolve", "dlq release", "dlq replay",
	"approvals list", "approvals approve", "approvals reject", "approvals rerequest",
	"audit list", "audit show", "audit verify", "audit checkpoint", "audit export", "audit explain", "audit replay-decision",
	"groups list", "groups show", "groups ack", "groups hold", "groups release",
	"runs start",
}

// remoteStory runs one command line of a story through the story's server
// when it has a remote path, else locally; it returns the exit code.
func remoteStory(args []string) int {
	state := os.Getenv(storyRemoteEnv)
	code, how := remoteStoryRun(state, args)
	f, err := os.OpenFile(filepath.Join(state, "log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		fmt.Fprintf(f, "%s: replayctl %s -> %d\n", how, strings.Join(args, " "), code)
		f.Close()
	}
	return code
}

func remoteStoryRun(state string, args []string) (code int, how string) {
	words, flags, rest := splitStoryArgs(args)
	cmdline := strings.Join(words, " ")
	local := func(why string) (int, string) {
		stopStoryServer(state)
		return run(args, os.Stdin, os.Stdout, os.Stderr), "local (" + why + ")"
	}
	if os.Getenv("REPLAYCTL_SERVER") != "" {
		return run(args, os.Stdin, os.Stdout, os.Stderr), "own server"
	}
	if !slices.Contains(remoteCommands, cmdline) {
		return local("no remote path: " + cmdline)
	}
	for f := range flags {
		if localOnlyFlags[f] {
			return local("--" + f + " has no remote path")
		}
	}
	// The server is configured as the command would be locally: its own
	// flags, and the files and variables it reads (serve reads the
	// approvers file and the audit key once, at start).
	want := map[string][]string{}
	runs := runsSources(words)
	for f, v := range flags {
		// Elsewhere --source filters by source kind; the server's
		// sources matter only to the commands that read the sources.
		if serverFlags[f] && (f != "source" || runs) {
			want[f] = v
		}
	}
	approvers := "approvers.yaml"
	if v := want["approvers"]; len(v) > 0 {
		approvers = v[len(v)-1]
	}
	if b, err := os.ReadFile(approvers); err == nil {
		want["env:approvers-sha256"] = []string{fmt.Sprintf("%x", sha256.Sum256(b))}
	}
	if k := os.Getenv("REPLAYCTL_AUDIT_KEY"); k != "" {
		want["env:REPLAYCTL_AUDIT_KEY"] = []string{fmt.Sprintf("%x", sha256.Sum256([]byte(k)))}
	}
	srv, _ := readStoryServer(state)
	db := "replayctl.db"
	if v := want["db"]; len(v) > 0 {
		db = v[len(v)-1]
	}
	if _, err := os.Stat(db); err != nil && words[0] != "reconcile" {
		// Starting a server would create the state file.
		return local("no state file yet")
	}
	user := defaultActor()
	if v := flags["as"]; len(v) > 0 {
		user = v[len(v)-1]
	}
	secret, err := storyToken(state, user)
	if err != nil {
		fmt.Fprintf(os.Stderr, "remote story: token for %s: %v\n", user, err)
		return 1, "broken"
	}
	// A new user's token needs no restart: serve re-reads the tokens file.
	if srv == nil || !sameFlags(srv.Flags, want, readOnly[cmdline], runs) {
		if !runs {
			// serve needs a source; this command reads none.
			want["source"] = []string{"jsonl:" + filepath.Join(state, "none.jsonl")}
			if srv != nil && len(srv.Flags["source"]) > 0 {
				want["source"] = srv.Flags["source"]
			} else if err := os.WriteFile(filepath.Join(state, "none.jsonl"), nil, 0o600); err != nil {
				return 1, "broken"
			}
		}
		stopStoryServer(state)
		if srv, err = startStoryServer(state, want); err != nil {
			return local("serve did not start: " + err.Error())
		}
	}
	os.Setenv("REPLAYCTL_SERVER", "http://"+srv.Addr)
	os.Setenv("REPLAYCTL_TOKEN", secret)
	return run(rest, os.Stdin, os.Stdout, os.Stderr), "serve"
}

// splitStoryArgs returns the command words, the flags given (by long
// name, values in order) and the arguments to send with --server: the
// same without the flags that moved to the server (serverFlags) and --as
// (the token says who acts). Which flags take a value is read from the
// command itself.
func splitStoryArgs(args []string) (words []string, flags map[string][]string, rest []string) {
	flags = map[string][]string{}
	root := newRootCmd(&streams{in: os.Stdin, out: io.Discard, err: io.Discard})
	c, _, err := root.Find(args)
	if err != nil {
		c = root
	}
	words = strings.Fields(strings.TrimPrefix(c.CommandPath(), root.Name()))
	lookup := func(name string, short bool) *pflag.Flag {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.InheritedFlags(), root.PersistentFlags()} {
			if short {
				if f := fs.ShorthandLookup(name); f != nil {
					return f
				}
			} else if f := fs.Lookup(name); f != nil {
				return f
			}
		}
		return nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			rest = append(rest, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := lookup(name, !strings.HasPrefix(a, "--"))
		takes := f != nil && f.NoOptDefVal == ""
		toks := []string{a}
		if takes && !hasVal && i+1 < len(args) {
			i++
			val = args[i]
			toks = append(toks, val)
		}
		if f != nil {
			name = f.Name
		}
		flags[name] = append(flags[name], val)
		if name == "as" || (serverFlags[name] && (name != "source" || runsSources(words))) {
			continue
		}
		rest = append(rest, toks...)
	}
	return words, flags, rest
}

// sameFlags: a server started with a serves a command that wants b. A
// reading command uses no target and no approvers file, and only
// reconcile and plan read the sources, so a command takes the running
// server as it is when the rest agrees (a restart would be a change the
// story did not make).
// runsSources: only reconcile and plan read the sources; elsewhere
// --source filters by source kind.
func runsSources(words []string) bool {
	return len(words) > 0 && (words[0] == "reconcile" || words[0] == "plan")
}

func sameFlags(a, b map[string][]string, reading, runs bool) bool {
	ignored := func(k string) bool {
		return (k == "source" && !runs) ||
			(reading && (k == "target" || k == "probe" || k == "approvers" || k == "env:approvers-sha256"))
	}
	for _, m := range []map[string][]string{a, b} {
		for k := range m {
			if !ignored(k) && !slices.Equal(a[k], b[k]) {
				return false
			}
		}
	}
	return true
}

// readOnly commands change nothing in the state.
var readOnly = map[string]bool{
	"plan": true, "stats": true, "dlq list": true, "dlq show": true, "approvals list": true,
	"audit list": true, "audit show": true, "audit verify": true, "audit checkpoint": true,
	"audit export": true, "audit explain": true, "audit replay-decision": true,
	"groups list": true, "groups show": true,
}

// storyToken returns the admin token of user, creating it in the story's
// tokens file the first time.
func storyToken(state, user string) (string, error) {
	path := filepath.Join(state, "secrets.json")
	secrets := map[string]string{}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &secrets); err != nil {
			return "", err
		}
	}
	if s, ok := secrets[user]; ok {
		return s, nil
	}
	tokens, err := server.LoadTokens(filepath.Join(state, "tokens.json"))
	if err != nil {
		return "", err
	}
	s, err := tokens.Create(user, server.RoleAdmin, time.Now())
	if err != nil {
		return "", err
	}
	secrets[user] = s
	b, _ := json.Marshal(secrets)
	return s, os.WriteFile(path, b, 0o600)
}

func readStoryServer(state string) (*storyServer, error) {
	b, err := os.ReadFile(filepath.Join(state, "server.json"))
	if err != nil {
		return nil, err
	}
	var s storyServer
	return &s, json.Unmarshal(b, &s)
}

// startStoryServer starts `replayctl serve` (this same program, without
// the remote-story variables) in the story's directory on a free port and
// waits until it is ready. It outlives this command: the next commands of
// the story use it, and stopStoryServer ends it.
func startStoryServer(state string, flags map[string][]string) (*storyServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	args := []string{"serve", "--addr", addr, "--every", "0", "--tokens", filepath.Join(state, "tokens.json")}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range flags {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		if strings.HasPrefix(k, "env:") {
			continue
		}
		for _, v := range flags[k] {
			args = append(args, "--"+k, v)
		}
	}
	logf, err := os.OpenFile(filepath.Join(state, "serve.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- serve %s\n", strings.Join(args, " "))
	// Where this start's output begins: the server is ours only once it
	// says it listens on addr. Another story's server can take the port
	// between l.Close and serve's own Listen (stories run side by side),
	// and its /readyz answers 200: this story's commands then went to it
	// with this story's token and got 401.
	logStart, err := logf.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	c := exec.Command(os.Args[0], args...)
	for _, e := range os.Environ() {
		if k, _, _ := strings.Cut(e, "="); k != storyRemoteEnv && k != "REPLAYCTL_SERVER" && k != "REPLAYCTL_TOKEN" {
			c.Env = append(c.Env, e)
		}
	}
	// Its own output goes to a file: a child holding the command's stdout
	// would keep testscript waiting for it.
	c.Stdout, c.Stderr = logf, logf
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	srv := &storyServer{PID: c.Process.Pid, Addr: addr, Flags: flags}
	client := &http.Client{Timeout: time.Second}
	for range 1200 {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("serve exited (%v): %s", err, lastLine(filepath.Join(state, "serve.log")))
		default:
		}
		if !logSays(filepath.Join(state, "serve.log"), logStart, "listening on http://"+addr+"\n") {
			time.Sleep(25 * time.Millisecond)
			continue
		}
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				b, _ := json.Marshal(srv)
				return srv, os.WriteFile(filepath.Join(state, "server.json"), b, 0o600)
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	_ = c.Process.Kill()
	return nil, errors.New("serve not ready after 30s")
}

// logSays reports whether the log holds want after offset.
func logSays(path string, offset int64, want string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, offset, 1<<20))
	return err == nil && strings.Contains(string(b), want)
}

func lastLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			last = sc.Text()
		}
	}
	return last
}

// stopStoryServer ends the story's server (SIGTERM, as a service manager
// would) and waits until it is gone, so the state file is free.
func stopStoryServer(state string) {
	srv, err := readStoryServer(state)
	if err != nil {
		return
	}
	os.Remove(filepath.Join(state, "server.json"))
	if syscall.Kill(srv.PID, syscall.SIGTERM) != nil {
		return
	}
	for range 600 {
		if !processAlive(srv.PID) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(srv.PID, syscall.SIGKILL)
}

// processAlive: the server's parent command has exited, so a finished
// server may linger as a zombie until it is reaped; that counts as gone.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func countStoryLog(state string) (remote, local int) {
	f, err := os.Open(filepath.Join(state, "log"))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "serve:"), strings.HasPrefix(l, "own server:"):
			remote++
		case l != "":
			local++
		}
	}
	return remote, local
}
