package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/replayctl/replayctl/internal/testsvc"
)

func TestMain(m *testing.M) {
	testscript.Main(storiesAtOnce{m}, map[string]func(){
		"replayctl": func() {
			if os.Getenv(storyRemoteEnv) != "" {
				os.Exit(remoteStory(os.Args[1:]))
			}
			os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
	})
}

// storyParallel is how many stories run at once unless -parallel says.
// A story mostly waits on the processes it starts (each command is this
// test binary again, built with -race; a remote story also starts and
// stops serve): with go test's default of GOMAXPROCS at once the package
// took 311 s of wall clock for about 2 min of CPU on the 2-core CI
// machine, most of it in TestScriptsRemote.
const storyParallel = 8

// storiesAtOnce raises -test.parallel to storyParallel when the command
// line did not set it: testscript runs every story as a parallel subtest.
type storiesAtOnce struct{ m *testing.M }

func (s storiesAtOnce) Run() int {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(max(storyParallel, runtime.GOMAXPROCS(0)))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	code := s.m.Run()
	// The broker stories' RabbitMQ: Pdeathsig ends only its start script
	// when this process exits, and the Erlang VM stayed, one per run.
	testsvc.Stop()
	return code
}

// TestScripts runs the CLI stories in testdata/script, one per user story,
// each readable as documentation. Every script starts in a directory holding
// the bundled rules.yaml, policies/ and testdata/, as a user's checkout
// would, so that commands read exactly as in the README.
// TestScriptsRemote runs the same stories again through `replayctl serve`.
func TestScripts(t *testing.T) {
	t.Parallel() // with TestScriptsRemote: both suites share -parallel's places
	p := storyParams()
	p.Condition = func(cond string) (bool, error) {
		if cond == "remote" {
			return false, nil
		}
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	testscript.Run(t, p)
}

func storyParams() testscript.Params {
	return testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			for _, p := range []string{"rules.yaml", "policies", "testdata"} {
				if err := copyPath(filepath.Join("..", "..", p), filepath.Join(env.WorkDir, p)); err != nil {
					return err
				}
			}
			env.Values[sinkKey{}] = &sink{}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"sink":      sinkCmd,
			"exits":     exitsCmd,
			"sha256":    sha256Cmd,
			"capture":   captureCmd,
			"jsonarray": jsonArrayCmd,
			"freeport":  freePortCmd,
			"waitready": waitReadyCmd,
			"gencert":   genCertCmd,
			"tlsready":  tlsReadyCmd,
		},
	}
}

func copyPath(from, to string) error {
	fi, err := os.Stat(from)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return os.CopyFS(to, os.DirFS(from))
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// sink is a script's replay target: an HTTP server in the test process that
// records the Idempotency-Key of every POST and answers with status (0:
// hang up without an answer, after the request arrived).
type sink struct {
	mu     sync.Mutex
	srv    *httptest.Server
	keys   []string
	status int
}

type sinkKey struct{}

// sinkCmd: `sink start` (exports $SINK), `sink count` (POSTs received),
// `sink keys` (their Idempotency-Keys, sorted, one a line), `sink status
// CODE|hangup` (how the next POSTs are answered).
func sinkCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: sink start|count|keys|status CODE|hangup")
	}
	s := ts.Value(sinkKey{}).(*sink)
	s.mu.Lock()
	defer s.mu.Unlock()
	if args[0] == "start" {
		if s.srv != nil {
			ts.Fatalf("sink already started")
		}
		s.status = http.StatusOK
		s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
		ts.Defer(s.srv.Close)
		ts.Setenv("SINK", s.srv.URL)
		return
	}
	if s.srv == nil {
		ts.Fatalf("sink not started (run `sink start` first)")
	}
	switch args[0] {
	case "count":
		fmt.Fprintln(ts.Stdout(), len(s.keys))
	case "keys":
		for _, k := range slices.Sorted(slices.Values(s.keys)) {
			fmt.Fprintln(ts.Stdout(), k)
		}
	case "status":
		if len(args) != 2 {
			ts.Fatalf("usage: sink status CODE|hangup")
		}
		code := 0
		if args[1] != "hangup" {
			var err error
			code, err = strconv.Atoi(args[1])
			ts.Check(err)
		}
		s.status = code
	default:
		ts.Fatalf("unknown sink command %q", args[0])
	}
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	code := s.status
	s.mu.Unlock()
	if code != 0 {
		w.WriteHeader(code)
		return
	}
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

// exitsCmd: `exits N PROG ARGS...` runs PROG like exec and requires exit
// status N (testscript's `! exec` accepts any failure; the exit codes are
// a documented contract).
func exitsCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
	}
}

// sha256Cmd: `sha256 FILE` prints the file's hash (to show it did not change).
func sha256Cmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sha256 FILE")
	}
	fmt.Fprintf(ts.Stdout(), "%x\n", sha256.Sum256([]byte(ts.ReadFile(args[0]))))
}

// captureCmd: `capture VAR REGEXP` sets $VAR to REGEXP's first group (or
// whole match) in the last command's stdout, e.g. an approval id.
func captureCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: capture VAR REGEXP")
	}
	re, err := regexp.Compile(`(?m)` + args[1])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile("stdout"))
	if m == nil {
		ts.Fatalf("capture: no match for %#q in stdout", args[1])
	}
	ts.Setenv(args[0], m[len(m)-1])
}

// jsonArrayCmd: `jsonarray FILE N FIELD...` requires FILE (or stdout) to be
// a JSON array of N objects, each with every FIELD set (not null, "" or []).
func jsonArrayCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: jsonarray FILE N FIELD...")
	}
	var items []map[string]json.RawMessage
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &items))
	if n, err := strconv.Atoi(args[1]); err != nil || len(items) != n {
		ts.Fatalf("%s: %d objects, want %s", args[0], len(items), args[1])
	}
	for i, it := range items {
		for _, f := range args[2:] {
			switch v := strings.TrimSpace(string(it[f])); v {
			case "", "null", `""`, "[]":
				ts.Fatalf("%s: object %d (%s) has no %s", args[0], i, it["entry_id"], f)
			}
		}
	}
}

// freePortCmd: `freeport VAR` sets $VAR to a free 127.0.0.1:PORT for a
// `replayctl serve` the script starts in the background.
func freePortCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: freeport VAR")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	addr := l.Addr().String()
	ts.Check(l.Close())
	ts.Setenv(args[0], addr)
}

// waitReadyCmd: `waitready URL` polls URL/readyz until the server answers
// 200 (the serve process is starting in the background). It gives up
// after 600 tries (a minute), so a server that never comes up fails the
// script instead of hanging it.
func waitReadyCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitready URL")
	}
	client := &http.Client{Timeout: time.Second}
	for range 600 {
		resp, err := client.Get(args[0] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("server at %s not ready", args[0])
}

// genCertCmd: `gencert CERT KEY` writes a self-signed certificate for
// 127.0.0.1 (and localhost) and its ECDSA key, PEM, for `serve --tls-cert
// CERT --tls-key KEY`; the certificate is its own CA, so a client that
// trusts CERT verifies the server.
func genCertCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: gencert CERT KEY")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ts.Check(err)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "replayctl test"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	ts.Check(err)
	kb, err := x509.MarshalECPrivateKey(key)
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
}

// tlsReadyCmd: `tlsready URL CERT` polls URL/readyz over HTTPS, trusting
// only CERT, until it answers 200 (as waitready does over HTTP): the
// handshake verifies the server's certificate.
func tlsReadyCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: tlsready URL CERT")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(ts.ReadFile(args[1]))) {
		ts.Fatalf("%s: no certificate", args[1])
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	var last error
	for range 600 {
		resp, err := client.Get(args[0] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && resp.TLS != nil && len(resp.TLS.VerifiedChains) > 0 {
				return
			}
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("server at %s not ready over verified TLS: %v", args[0], last)
}
