package source

import (
	"context"
	"encoding/json"
	"os"
	"testing"
)

func TestDump(t *testing.T) {
	for _, spec := range []string{"cordum:../../testdata/cordum/dlq.jsonl", "cordum:../../testdata/cordum/entry.json", "cordum:../../testdata/cordum/array.json", "prodigy:../../testdata/prodigy", "nexora:../../testdata/nexora/dead-letters.json", "jsonl:../../testdata/jsonl/entries.jsonl",
		"cordum:../../testdata/malformed/empty.json", "cordum:../../testdata/malformed/garbage.bin", "cordum:../../testdata/malformed/open-bracket.json", "nexora:../../testdata/malformed/nexora-items-number.json", "jsonl:../../testdata/malformed/lines.jsonl", "cordum:../../testdata/malformed/lines.jsonl", "cordum:../../testdata/malformed/truncated-array.json", "nexora:../../testdata/malformed/garbage.bin", "nexora:../../testdata/malformed/open-bracket.json"} {
		s, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Log("==", s)
		for e, err := range s.Entries(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			e.Payload = nil
			b, _ := json.Marshal(e)
			os.Stdout.Write(append(b, '\n'))
		}
	}
}
