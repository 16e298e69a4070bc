package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// Issue 14: a FIFO as a source, or in a Prodigy items/ directory (one file
// per item, src/cook/execution/dlq.rs:536 upstream), blocked forever in
// open, and SIGTERM could not end the process. The reads run in a child
// process: on the old code the child hangs in open(2), which no context can
// interrupt, and the parent's guard kills it and fails the test instead of
// hanging the whole test binary.
const fifoChildEnv = "REPLAYCTL_TEST_FIFO_CHILD"

func TestNonRegularFilesNeverBlock(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "dlq.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	root := copyProdigy(t)
	if err := syscall.Mkfifo(filepath.Join(prodigyItems(root), "item-fifo.json"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The guard is a hang detector, not a timing assertion: a correct run
	// takes milliseconds; a blocked one never ends.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFIFOChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), fifoChildEnv+"="+fifo+"\n"+root)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("reading a FIFO blocked: the child was killed after the guard\n%s", out)
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, want := range []string{
		"parse: " + fifo + ": not a regular file (a named pipe)",
		"entries: read jsonl source: " + fifo + ": not a regular file (a named pipe)",
		"item item-fifo.json: not a regular file (a named pipe)",
		"prodigy entries: 11",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}

// TestFIFOChild is the child of TestNonRegularFilesNeverBlock; it does
// nothing when run on its own.
func TestFIFOChild(t *testing.T) {
	arg := os.Getenv(fifoChildEnv)
	if arg == "" {
		t.Skip("run by TestNonRegularFilesNeverBlock")
	}
	fifo, root, _ := strings.Cut(arg, "\n")
	ctx := context.Background()

	_, err := Parse("jsonl:" + fifo)
	var ue *UsageError
	if !errors.As(err, &ue) || !errors.Is(err, ErrNotRegular) {
		t.Errorf("Parse of a FIFO: %v, want a usage error wrapping ErrNotRegular", err)
	} else {
		fmt.Printf("parse: %v\n", ue.Err)
	}

	// A path that was a file when parsed and is a FIFO when read (serve
	// parses once and reads every run).
	src := &records.File{Spec: "jsonl:" + fifo, Path: fifo, Format: jsonl.Format()}
	for _, err := range src.Entries(ctx) {
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("entries of a FIFO: %v, want ErrNotRegular", err)
		}
		fmt.Printf("entries: %v\n", err)
	}

	p, err := Parse("prodigy:" + root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for e, err := range p.Entries(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if strings.HasSuffix(e.Origin, "item-fifo.json") {
			if !e.Undecodable() {
				t.Fatalf("the FIFO item was decoded: %+v", e)
			}
			fmt.Printf("item %s: %s\n", filepath.Base(e.Origin), strings.TrimPrefix(e.DecodeError, e.Origin+": "))
		}
	}
	fmt.Printf("prodigy entries: %d\n", n)
}

// Issue 14: a Prodigy item that is a symbolic link to a file outside the
// source directory was read and its content replayed. It must be an
// undecodable entry (triage quarantines those as poison) naming the reason,
// with none of the target's content; a link inside the root still reads.
func TestProdigySymlinkOutsideRootRefused(t *testing.T) {
	root := copyProdigy(t)
	items := prodigyItems(root)
	secret := filepath.Join(t.TempDir(), "secret.json")
	write(t, secret, `{"item_id":"stolen","item_data":{"token":"s3cr3t"},"failure_count":1,`+
		`"failure_history":[{"attempt_number":1,"error_type":"Timeout","error_message":"x"}]}`)
	if err := os.Symlink(secret, filepath.Join(items, "item-out.json")); err != nil {
		t.Fatal(err)
	}
	// A relative link that climbs out of the root is refused too.
	rel, err := filepath.Rel(items, secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, filepath.Join(items, "item-rel.json")); err != nil {
		t.Fatal(err)
	}
	// A link to another item inside the root is read as that item.
	if err := os.Symlink("item-001.json", filepath.Join(items, "item-in.json")); err != nil {
		t.Fatal(err)
	}

	byOrigin := map[string]entry.Entry{}
	for _, e := range readAll(t, "prodigy:"+root) {
		byOrigin[filepath.Base(e.Origin)] = e
	}
	for _, name := range []string{"item-out.json", "item-rel.json"} {
		e, ok := byOrigin[name]
		if !ok {
			t.Fatalf("%s was skipped: it must be yielded so that it is quarantined", name)
		}
		if !e.Undecodable() || !strings.Contains(e.DecodeError, "outside the source directory") {
			t.Errorf("%s: decode error %q, want a refusal naming the reason", name, e.DecodeError)
		}
		if strings.Contains(string(e.Payload), "s3cr3t") || e.ID == "stolen" || strings.Contains(e.DecodeError, "s3cr3t") {
			t.Errorf("%s: the target's content was read: %+v", name, e)
		}
	}
	in := byOrigin["item-in.json"]
	if in.Undecodable() || in.ID != "item-001" {
		t.Errorf("a link inside the root: %+v, want item-001 decoded", in)
	}
}
