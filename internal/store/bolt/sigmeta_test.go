package bolt

import (
	"encoding/json"
	"testing"
)

// FuzzSigMetaAsEncodingJSON holds keepExample's record to encoding/json:
// appendSigMeta writes json.Marshal's bytes, and sigExample reads back the
// example json.Unmarshal reads, or says it cannot (ok false), for the
// records it writes and for any other bytes.
func FuzzSigMetaAsEncodingJSON(f *testing.F) {
	for _, s := range [][2]string{
		{"transient", "jsonl:e1"}, {"", ""}, {"poison", `jsonl:a","example":"b`}, {"<html>", "cordum:j&1"},
		{"x\\", `y\`}, {"\u2028", "\xff"}, {`"`, `"}`}, {"transient", "prodigy:job/1:item-9"},
	} {
		f.Add(s[0], s[1], []byte(nil))
	}
	f.Add("", "", []byte(`{"class":"x","example":"}`))
	f.Add("", "", []byte(`{"example":"a","class":"x"}`))
	f.Add("", "", []byte(`{"class":"\","example":"x"}`)) // invalid JSON: a lone escape
	f.Fuzz(func(t *testing.T, class, example string, raw []byte) {
		want, err := json.Marshal(sigMeta{Class: class, Example: example})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendSigMeta(nil, class, example); string(got) != string(want) {
			t.Fatalf("appendSigMeta(%q, %q) = %s, json.Marshal %s", class, example, got, want)
		}
		for _, v := range [][]byte{want, raw} {
			ex, ok := sigExample(v)
			if !ok {
				continue
			}
			var m sigMeta
			if err := json.Unmarshal(v, &m); err != nil {
				t.Fatalf("sigExample read %q from %q, which does not decode: %v", ex, v, err)
			}
			if string(ex) != m.Example {
				t.Fatalf("sigExample(%q) = %q, json.Unmarshal %q", v, ex, m.Example)
			}
		}
	})
}
