package source

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }

const streamLines = 200_000

// writeBigDLQ writes a Cordum JSON Lines file of streamLines records.
func writeBigDLQ(t *testing.T) (string, int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "big.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range streamLines {
		fmt.Fprintf(w, `{"job_id":"job_%06d","topic":"tool.email.send","reason_code":"timeout","reason":"smtp relay timed out","attempts":3,"idempotency_key":"run_%06d:step_1","payload":{"to":"ops@example.com","n":%d}}`+"\n", i, i, i)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	return path, fi.Size()
}

// openFiles counts this process's open file descriptors (Linux only).
func openFiles(t *testing.T) int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(fds)
}

func TestStreamingStopsEarly(t *testing.T) {
	path, _ := writeBigDLQ(t)
	src, err := Parse("cordum:" + path)
	if err != nil {
		t.Fatal(err)
	}
	fds := openFiles(t)
	n := 0
	for e, err := range src.Entries(context.Background()) {
		if err != nil || e.ID != "job_000000" {
			t.Fatalf("first entry: %+v, %v", e, err)
		}
		n++
		break
	}
	if n != 1 {
		t.Fatalf("got %d entries", n)
	}
	if got := openFiles(t); got != fds {
		t.Errorf("%d open files after stopping early, %d before: the source did not stop", got, fds)
	}
}

func TestStreamingCountsAllWithoutHoldingThem(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 200k-line file")
	}
	path, size := writeBigDLQ(t)
	src, err := Parse("cordum:" + path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var heap uint64
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Undecodable() {
			t.Fatalf("entry %d undecodable: %s", n, e.DecodeError)
		}
		if n == streamLines/2 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			heap = ms.HeapAlloc
		}
		n++
	}
	if n != streamLines {
		t.Fatalf("got %d entries, want %d", n, streamLines)
	}
	// Half-way through, what is live must be far less than the file: the
	// source keeps one record, not the DLQ.
	if heap > uint64(size)/4 {
		t.Errorf("live heap %d bytes half-way through a %d-byte file", heap, size)
	}
	t.Logf("%d entries, file %d bytes, live heap half-way %d bytes", n, size, heap)
}

func BenchmarkCordumJSONL(b *testing.B) {
	var sb strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&sb, `{"job_id":"job_%06d","topic":"tool.email.send","reason_code":"timeout","reason":"smtp relay timed out","attempts":3,"idempotency_key":"run_%06d:step_1","labels":{"risk":"low"},"payload":{"to":"ops@example.com","n":%d}}`+"\n", i, i, i)
	}
	data := sb.String()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rr := records.Reader{Format: cordum.Format(), Name: "b.jsonl", R: strings.NewReader(data), MaxLine: records.MaxRecord}
		rr.Each(context.Background(), func(e entry.Entry, err error) bool { return err == nil })
	}
}
