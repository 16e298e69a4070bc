package testsvc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found: CI must install it (.ci/run installs postgresql and redis-server)", what)
	}
	t.Skipf("%s not found: install it (apt-get install -y postgresql redis-server) to run this test", what)
}

// FreePort returns a local TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func pgBin(name string) string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if p := filepath.Join(dirs[i], name); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// pgServer is one PostgreSQL server per test binary; each test gets a
// database of its own on it.
var pg struct {
	once  sync.Once
	mu    sync.Mutex
	admin string
	port  int
	dir   string
	cmd   *exec.Cmd
	err   error
	n     int
}

// Stop stops the shared servers; call it from TestMain after m.Run. (They
// also die with the test process: Pdeathsig.)
func Stop() {
	stopRabbit()
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.cmd != nil && pg.cmd.Process != nil {
		_ = pg.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = pg.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = pg.cmd.Process.Kill()
		}
		pg.cmd = nil
	}
	if pg.dir != "" {
		os.RemoveAll(pg.dir)
	}
	// A later PostgresDB starts a new server: the benchmark harness stops
	// the server after each step that used one (workers, then pgread).
	pg.once, pg.err, pg.dir, pg.admin = sync.Once{}, nil, "", ""
}

// Postgres returns the DSN of a fresh database on the test binary's
// PostgreSQL server, starting it on first use.
func Postgres(t testing.TB) string {
	t.Helper()
	initdb, postgres := pgBin("initdb"), pgBin("postgres")
	if initdb == "" || postgres == "" {
		missing(t, "PostgreSQL (initdb, postgres)")
	}
	pg.once.Do(func() { pg.err = startPostgres(initdb, postgres) })
	if pg.err != nil {
		t.Fatal(pg.err)
	}
	pg.mu.Lock()
	pg.n++
	name := fmt.Sprintf("t%d", pg.n)
	pg.mu.Unlock()
	conn, err := pgx.Connect(context.Background(), pg.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://replayctl@127.0.0.1:%d/%s?sslmode=disable", pg.port, name)
}

func startPostgres(initdb, postgres string) error {
	dir, err := os.MkdirTemp("", "replayctl-pg-")
	if err != nil {
		return err
	}
	pg.dir = dir
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root and no postgres user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return err
		}
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data := filepath.Join(dir, "data")
	ini := exec.Command(initdb, "-D", data, "-U", "replayctl", "--auth=trust", "-E", "UTF8", "--no-sync")
	ini.SysProcAttr = attr
	if out, err := ini.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	pg.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(postgres, "-D", data, "-p", strconv.Itoa(pg.port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300")
	cmd.SysProcAttr = attr
	logf, _ := os.Create(filepath.Join(dir, "postgres.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	pg.cmd = cmd
	pg.admin = fmt.Sprintf("postgres://replayctl@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(context.Background(), pg.admin)
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return fmt.Errorf("postgres did not start: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Redis starts a redis-server for the test and returns its address.
func Redis(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server")
	}
	dir := t.TempDir()
	port := FreePort(t)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("redis did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return addr
}

// PostgresDB starts (once per process) the PostgreSQL server and returns
// the DSN of a new database on it, for programs that are not tests (the
// benchmark harness). Call Stop when done.
func PostgresDB(name string) (string, error) {
	initdb, postgres := pgBin("initdb"), pgBin("postgres")
	if initdb == "" || postgres == "" {
		return "", fmt.Errorf("PostgreSQL not installed (apt-get install -y postgresql)")
	}
	pg.once.Do(func() { pg.err = startPostgres(initdb, postgres) })
	if pg.err != nil {
		return "", pg.err
	}
	conn, err := pgx.Connect(context.Background(), pg.admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return fmt.Sprintf("postgres://replayctl@127.0.0.1:%d/%s?sslmode=disable", pg.port, name), nil
}
