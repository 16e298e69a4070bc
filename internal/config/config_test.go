package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type flags struct {
	fs      *pflag.FlagSet
	par     int
	rate    float64
	every   time.Duration
	db      string
	store   string
	sources []string
	level   string
}

func newFlags() *flags {
	f := &flags{fs: pflag.NewFlagSet("t", pflag.ContinueOnError)}
	f.fs.IntVar(&f.par, "max-parallel", 5, "")
	f.fs.Float64Var(&f.rate, "rate", 0, "")
	f.fs.DurationVar(&f.every, "every", 5*time.Minute, "")
	f.fs.StringVar(&f.db, "db", "replayctl.db", "")
	f.fs.StringVar(&f.store, "store", "", "")
	f.fs.StringArrayVar(&f.sources, "source", nil, "")
	f.fs.StringVar(&f.level, "log-level", "info", "")
	return f
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "replayctl.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// flag > env > file > default, setting by setting.
func TestPrecedenceFlagEnvFileDefault(t *testing.T) {
	path := writeFile(t, "max-parallel: 7\nrate: 2.5\nevery: 1m\ndb: /var/lib/file.db\nsource: [cordum:a.jsonl, jsonl:b.jsonl]\n")
	env := []string{"REPLAYCTL_CONFIG=" + path, "REPLAYCTL_RATE=9", "REPLAYCTL_EVERY=30s", "REPLAYCTL_LOG_LEVEL=debug", "HOME=/root"}
	c, err := Load("", env)
	if err != nil {
		t.Fatal(err)
	}
	f := newFlags()
	if err := f.fs.Parse([]string{"--every", "10s"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(f.fs); err != nil {
		t.Fatal(err)
	}
	if f.every != 10*time.Second { // flag beats env and file
		t.Errorf("every = %v, want the flag's 10s", f.every)
	}
	if f.rate != 9 { // env beats file
		t.Errorf("rate = %v, want env's 9", f.rate)
	}
	if f.level != "debug" { // env beats default
		t.Errorf("log-level = %q, want env's debug", f.level)
	}
	if f.par != 7 || f.db != "/var/lib/file.db" { // file beats default
		t.Errorf("max-parallel = %d, db = %q, want the file's", f.par, f.db)
	}
	if strings.Join(f.sources, " ") != "cordum:a.jsonl jsonl:b.jsonl" {
		t.Errorf("source = %q, want the file's list", f.sources)
	}
	if f.store != "" {
		t.Errorf("store = %q, want the default", f.store)
	}
	got := map[string]string{}
	for _, s := range Effective(f.fs, c) {
		got[s.Name] = s.Origin
	}
	want := map[string]string{"every": FromFlag, "rate": FromEnv, "log-level": FromEnv, "max-parallel": FromFile, "db": FromFile, "store": FromDefault}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("origin of %s = %q, want %q", k, got[k], v)
		}
	}
}

func TestEnvListAndBadValuesNameTheirSource(t *testing.T) {
	c, err := Load("", []string{"REPLAYCTL_SOURCE=jsonl:a,jsonl:b", "REPLAYCTL_MAX_PARALLEL=many"})
	if err != nil {
		t.Fatal(err)
	}
	f := newFlags()
	err = c.Apply(f.fs)
	if err == nil || !strings.Contains(err.Error(), "REPLAYCTL_MAX_PARALLEL") {
		t.Fatalf("bad env value: %v", err)
	}
	if strings.Join(f.sources, " ") != "jsonl:a jsonl:b" {
		t.Errorf("source = %q", f.sources)
	}
}

func TestFileErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil); err == nil {
		t.Error("a missing --config file must be an error")
	}
	p := writeFile(t, "max-parallel: [\n")
	if _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("broken YAML: %v (must name the file)", err)
	}
	p = writeFile(t, "max-paralel: 3\n")
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(map[string]bool{"max-parallel": true}); err == nil || !strings.Contains(err.Error(), "max-paralel") {
		t.Errorf("misspelt key: %v", err)
	}
}

func TestRedact(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"token", "rpl_secret", "REDACTED"},
		{"store", "postgres://replayctl:hunter2@db:5432/r", "postgres://replayctl:REDACTED@db:5432/r"},
		{"source", "[cordum-redis:redis://:pw@r:6379/0,jsonl:a]", "[cordum-redis:redis://:REDACTED@r:6379/0,jsonl:a]"},
		{"db", "replayctl.db", "replayctl.db"},
		{"notify-slack", "[https://hooks.slack.com/services/T0/B0/xyz]", "REDACTED"},
	} {
		if got := Redact(c.name, c.in); got != c.want {
			t.Errorf("Redact(%s, %q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}
