package source

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/connector/nexora"
	"github.com/replayctl/replayctl/internal/connector/prodigy"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// addSeeds adds every sample under testdata/DIR and testdata/malformed.
func addSeeds(f *testing.F, dirs ...string) {
	f.Helper()
	for _, dir := range append(dirs, "malformed") {
		err := filepath.WalkDir(td(dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			f.Add(data)
			return nil
		})
		if err != nil {
			f.Fatal(err)
		}
	}
}

// fuzzRecords reads data as a file of format f and checks the properties
// every file-based source must have: no panic, no fatal error from an
// in-memory file, every entry named and keyed, and input that holds
// anything yields at least one entry.
func fuzzRecords(t *testing.T, f records.Format, data []byte) {
	rr := records.Reader{Format: f, Name: "fuzz.json", R: bytes.NewReader(data), MaxLine: 1 << 16}
	n := 0
	rr.Each(context.Background(), func(e entry.Entry, err error) bool {
		if err != nil {
			t.Fatalf("fatal error from an in-memory file: %v", err)
		}
		checkEntry(t, e)
		if e.Source != f.Kind {
			t.Fatalf("source %q, want %q", e.Source, f.Kind)
		}
		if _, err := json.Marshal(e); err != nil {
			t.Fatalf("entry does not marshal: %v", err)
		}
		n++
		return true
	})
	if n == 0 && !emptyInput(data, f.Layout) {
		t.Fatalf("no entry from %q", data)
	}
}

// emptyInput reports whether data legitimately holds no record: nothing
// but white space, or (for the array and list layouts) an empty list.
func emptyInput(data []byte, l records.Layout) bool {
	d := records.TrimSpace(bytes.TrimPrefix(data, []byte{0xEF, 0xBB, 0xBF}))
	if len(d) == 0 {
		return true
	}
	if l == records.LayoutLines || !json.Valid(d) {
		return false
	}
	switch d[0] {
	case '[':
		var v []json.RawMessage
		return json.Unmarshal(d, &v) == nil && len(v) == 0
	case '{':
		// A sniffed file is a list response when its object's first key
		// is "items" or "next_cursor" (records.listResponse); FuzzCordum
		// found `{   "items": [] } ` read as the empty list it is.
		if l != records.LayoutList && (l != records.LayoutSniffed || !listFirstKey(d)) {
			return false
		}
		// Every "items" key must be an empty array (the reader reads them all).
		dec := json.NewDecoder(bytes.NewReader(d))
		dec.Token()
		found := false
		for dec.More() {
			key, _ := dec.Token()
			var v json.RawMessage
			dec.Decode(&v)
			if key == "items" {
				var items []json.RawMessage
				if json.Unmarshal(v, &items) != nil || v[0] != '[' || len(items) > 0 {
					return false
				}
				found = true
			}
		}
		return found
	}
	return false
}

func FuzzCordum(f *testing.F) {
	addSeeds(f, "cordum")
	f.Add([]byte("{\n\"job_id\": \"a\"\n}\n{\"job_id\": \"b\"}"))
	f.Add([]byte(`{   "items": [] } `)) // a gateway's empty list answer: no entry
	f.Add([]byte(`{"items": [], "items": [{"job_id": "a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRecords(t, cordum.Format(), data) })
}

func FuzzNexora(f *testing.F) {
	addSeeds(f, "nexora")
	f.Add([]byte(`{"items":[],"items":[{"id":"a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRecords(t, nexora.Format(), data) })
}

func FuzzJSONL(f *testing.F) {
	addSeeds(f, "jsonl")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRecords(t, jsonl.Format(), data) })
}

func FuzzProdigyItem(f *testing.F) {
	addSeeds(f, "prodigy")
	f.Fuzz(func(t *testing.T, data []byte) {
		e := prodigy.DecodeItem(data, "items/item.json", "job")
		checkEntry(t, e)
		if e.Source != "prodigy" {
			t.Fatalf("source %q", e.Source)
		}
		if !e.Undecodable() && (e.Scope != "job" || e.IdempotencyKey != entry.DeriveKey("prodigy", "job/"+e.ID)) {
			t.Fatalf("scope %q key %q", e.Scope, e.IdempotencyKey)
		}
		if _, err := json.Marshal(e); err != nil {
			t.Fatalf("entry does not marshal: %v", err)
		}
	})
}

// listFirstKey reports whether the JSON object d's first key is one only a
// list response has, as the sniffing reader decides.
func listFirstKey(d []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(d))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	key, err := dec.Token()
	return err == nil && (key == "items" || key == "next_cursor")
}
