package main

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"replayctl": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the CLI stories in testdata/script, each readable as
// documentation. Every script starts in a directory holding the bundled
// rules.yaml, policies/ and testdata/, as a user's checkout would.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			for _, p := range []string{"rules.yaml", "policies", "testdata"} {
				if err := os.CopyFS(filepath.Join(env.WorkDir, p), os.DirFS(filepath.Join("../..", p))); err != nil {
					if err := copyFile(filepath.Join("../..", p), filepath.Join(env.WorkDir, p)); err != nil {
						return err
					}
				}
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"sink":   sinkCmd,
			"sha256": sha256Cmd,
		},
	})
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// sinks are the scripts' replay targets, by script work dir.
var sinks sync.Map

type scriptSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	keys   []string
	status int
}

// sinkCmd: `sink start` (exports $SINK), `sink count`, `sink keys`,
// `sink status CODE`.
func sinkCmd(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: sink start|count|keys|status CODE")
	}
	dir := ts.Getenv("WORK")
	if args[0] == "start" {
		s := &scriptSink{status: http.StatusOK}
		s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
			code := s.status
			s.mu.Unlock()
			w.WriteHeader(code)
		}))
		sinks.Store(dir, s)
		ts.Defer(s.srv.Close)
		ts.Setenv("SINK", s.srv.URL)
		return
	}
	v, ok := sinks.Load(dir)
	if !ok {
		ts.Fatalf("sink not started")
	}
	s := v.(*scriptSink)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch args[0] {
	case "count":
		fmt.Fprintln(ts.Stdout(), len(s.keys))
	case "keys":
		keys := append([]string(nil), s.keys...)
		sort.Strings(keys)
		fmt.Fprintln(ts.Stdout(), strings.Join(keys, "\n"))
	case "status":
		code, err := strconv.Atoi(args[1])
		ts.Check(err)
		s.status = code
	default:
		ts.Fatalf("unknown sink command %q", args[0])
	}
}

// sha256Cmd prints a file's hash (to show a file did not change).
func sha256Cmd(ts *testscript.TestScript, neg bool, args []string) {
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "%x\n", sha256.Sum256(b))
}
