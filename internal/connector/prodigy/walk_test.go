package prodigy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// writeItems writes n minimal Prodigy items (iepathos/prodigy
// src/cook/execution/dlq.rs DeadLetteredItem: item_id, item_data,
// failure_count, failure_history, ...) into dir/JOB/items.
func writeItems(t *testing.T, dir, job string, n int) []string {
	t.Helper()
	items := filepath.Join(dir, job, "mapreduce", "dlq", job, "items")
	if err := os.MkdirAll(items, 0o755); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s/item-%06d", job, i)
		data := fmt.Sprintf(`{"item_id":"item-%06d","item_data":{"n":%d},"failure_count":1,"failure_history":[{"attempt_number":1,"error_type":"Timeout","error_message":"timed out"}]}`, i, i)
		if err := os.WriteFile(filepath.Join(items, fmt.Sprintf("item-%06d.json", i)), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// A directory larger than one batch is read batch by batch: every item
// comes out exactly once, items of other jobs too, and small directories
// keep their lexical order.
func TestProdigyLargeDirectoryInBatches(t *testing.T) {
	root := t.TempDir()
	want := append(writeItems(t, root, "job-a", 11), writeItems(t, root, "job-b", 2)...)
	want = append(want, writeItems(t, root, "job-c", 7)...)
	for _, batch := range []int{3, 7, 100} {
		s := &Source{spec: "prodigy:" + root, root: root, dirBatch: batch}
		var got []string
		for e, err := range s.Entries(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			if e.Undecodable() {
				t.Fatalf("batch %d: %s undecodable: %s", batch, e.Origin, e.DecodeError)
			}
			got = append(got, e.Scope+"/"+e.ID)
		}
		// Every directory fits in one batch of 100: lexical order, as
		// before issue 16.
		if batch == 100 && !slices.Equal(got, want) {
			t.Errorf("batch %d: %v, want lexical order %v", batch, got, want)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("batch %d: got %v, want each of %v once", batch, got, want)
		}
	}
}

// A consumer that stops early stops the walk, large directory or not.
func TestProdigyBatchedWalkStopsEarly(t *testing.T) {
	root := t.TempDir()
	writeItems(t, root, "job-a", 20)
	s := &Source{spec: "prodigy:" + root, root: root, dirBatch: 4}
	n := 0
	for _, err := range s.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 5 {
			break
		}
	}
	if n != 5 {
		t.Fatalf("got %d entries", n)
	}
}

// Memory does not grow with a directory's size (issue 16: 1M items made
// 252 MB). Half-way through a 30k-item directory, the live heap holds a
// batch of names, not the directory: filepath.WalkDir's whole listing
// was about 100 bytes a name, 3 MB here.
func TestProdigyLargeDirectoryMemoryIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 30k files")
	}
	const n = 30_000
	root := t.TempDir()
	writeItems(t, root, "job-a", n)
	s := &Source{spec: "prodigy:" + root, root: root}
	runtime.GC()
	var before, half runtime.MemStats
	runtime.ReadMemStats(&before)
	count := 0
	for e, err := range s.Entries(context.Background()) {
		if err != nil || e.Undecodable() {
			t.Fatal(e.DecodeError, err)
		}
		if count == n/2 {
			runtime.GC()
			runtime.ReadMemStats(&half)
		}
		count++
	}
	if count != n {
		t.Fatalf("got %d of %d items", count, n)
	}
	grown := int64(half.HeapAlloc) - int64(before.HeapAlloc)
	if grown > 1<<20 {
		t.Errorf("live heap grew %d bytes half-way through %d items: the directory was held, not streamed", grown, n)
	}
	t.Logf("live heap half-way: %+d bytes", grown)
}
