package testsvc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rabbit is one rabbitmq-server per test binary (it takes seconds to
// boot); each test declares queues of its own on it.
var rabbit struct {
	once sync.Once
	mu   sync.Mutex
	url  string
	dir  string
	cmd  *exec.Cmd
	err  error
}

// RabbitMQEnv names the variable through which a test binary re-executed by
// a kill test finds its parent's server instead of starting its own.
const RabbitMQEnv = "REPLAYCTL_TEST_RABBITMQ_URL"

func rabbitBin() string {
	// The package's own script: /usr/sbin/rabbitmq-server switches to the
	// rabbitmq user through su, which this process does itself.
	if p, _ := filepath.Glob("/usr/lib/rabbitmq/bin/rabbitmq-server"); len(p) == 1 {
		return p[0]
	}
	if p, err := exec.LookPath("rabbitmq-server"); err == nil {
		return p
	}
	return ""
}

// RabbitMQ returns the amqp:// URL (guest user, vhost /) of the test
// binary's RabbitMQ server, starting it on first use: on free local
// ports, with a private node name, its data and logs in a temporary
// directory, no plugins (management included), and as the rabbitmq user
// when running as root (the server refuses root).
func RabbitMQ(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(RabbitMQEnv); u != "" {
		return u
	}
	bin := rabbitBin()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("rabbitmq-server not found: CI must install it (.ci/run installs rabbitmq-server)")
		}
		t.Skip("rabbitmq-server not found: install it (apt-get install -y rabbitmq-server) to run this test")
	}
	rabbit.once.Do(func() { rabbit.err = startRabbit(bin) })
	if rabbit.err != nil {
		t.Fatal(rabbit.err)
	}
	return rabbit.url
}

func startRabbit(bin string) error {
	dir, err := os.MkdirTemp("", "replayctl-rabbitmq-")
	if err != nil {
		return err
	}
	rabbit.dir = dir
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("rabbitmq")
		if err != nil {
			return fmt.Errorf("running as root and no rabbitmq user to run RabbitMQ as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return err
		}
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	port, dist := freePort(), freePort()
	if port == 0 || dist == 0 {
		return fmt.Errorf("no free port for rabbitmq")
	}
	plugins := filepath.Join(dir, "enabled_plugins")
	if err := os.WriteFile(plugins, []byte("[].\n"), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=" + dir, // the Erlang cookie goes here
		"LANG=C.UTF-8",
		fmt.Sprintf("RABBITMQ_NODENAME=replayctl-test-%d@localhost", port),
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(port),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(dist),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + plugins,
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq"), // none: defaults
		"RABBITMQ_PID_FILE=" + filepath.Join(dir, "pid"),
	}
	cmd.SysProcAttr = attr
	logf, _ := os.Create(filepath.Join(dir, "server.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start rabbitmq-server: %w", err)
	}
	rabbit.cmd = cmd
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(90 * time.Second)
	for {
		// The port opens once the broker has booted.
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			rabbit.url = "amqp://guest:guest@" + addr + "/"
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			stopRabbit()
			return fmt.Errorf("rabbitmq-server did not start in 90s:\n%s", log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stopRabbit stops the server's process group (the script, erl, beam).
func stopRabbit() {
	rabbit.mu.Lock()
	defer rabbit.mu.Unlock()
	if rabbit.cmd != nil && rabbit.cmd.Process != nil {
		_ = syscall.Kill(-rabbit.cmd.Process.Pid, syscall.SIGKILL)
		_ = rabbit.cmd.Wait()
		rabbit.cmd = nil
	}
	if rabbit.dir != "" {
		os.RemoveAll(rabbit.dir)
		rabbit.dir = ""
	}
	rabbit.once, rabbit.err, rabbit.url = sync.Once{}, nil, ""
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// RabbitMQURL starts (once per process) the RabbitMQ server and returns
// its amqp:// URL, for programs that are not tests (the benchmark
// harness). Call Stop when done.
func RabbitMQURL() (string, error) {
	bin := rabbitBin()
	if bin == "" {
		return "", fmt.Errorf("rabbitmq-server not installed (apt-get install -y rabbitmq-server)")
	}
	rabbit.once.Do(func() { rabbit.err = startRabbit(bin) })
	return rabbit.url, rabbit.err
}
