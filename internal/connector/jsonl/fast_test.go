package jsonl

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/gen"
)

// corpusLines are lines as the benchmarks' corpus has them (internal/gen,
// seed 2, as replayCorpus; seed 3 with labels and malformed lines).
func corpusLines(tb testing.TB, o gen.Options) [][]byte {
	tb.Helper()
	var out [][]byte
	f := GenFormat()
	if err := gen.Each(o, func(r gen.Record) error {
		out = append(out, bytes.TrimSuffix(f.Line(r), []byte("\n")))
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return out
}

// sampleLines are the lines of testdata/jsonl.
func sampleLines(tb testing.TB) [][]byte {
	tb.Helper()
	data, err := os.ReadFile(td("jsonl", "entries.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(data), []byte("\n"))
}

// sameAsStrict fails t unless decodeJSONL gives for raw what the strict
// decoder alone gives: the same entry, or the same error text. It
// returns whether the fast path took the line.
func sameAsStrict(t *testing.T, raw []byte) bool {
	t.Helper()
	var got, want entry.Entry
	var sd records.StrictDecoder
	gotErr := decodeJSONL(raw, &got, &sd)
	wantErr := decodeStrict(raw, &want, nil)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%q: decodeJSONL says %v, the strict decoder %v", raw, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decodeJSONL decoded\n%#v\nthe strict decoder\n%#v", raw, got, want)
	}
	var e entry.Entry
	return decodeFast(raw, &e)
}

// The fast path takes what the sources write and the benchmarks read:
// were it to give up on them, it would be dead code.
func TestDecodeFastTakesCorpusLines(t *testing.T) {
	lines := append(corpusLines(t, gen.Options{N: 50, Seed: 2, AutoOnly: true}),
		corpusLines(t, gen.Options{N: 200, Seed: 3, Malformed: 0.05})...)
	for _, raw := range append(lines, sampleLines(t)...) {
		fast := sameAsStrict(t, raw)
		// a malformed corpus line is cut off; testdata's line 5 has an
		// unknown field
		bad := !bytes.HasSuffix(raw, []byte("}")) || bytes.Contains(raw, []byte(`"priority":"high"`))
		if fast == bad {
			t.Errorf("%q: fast path took it %v, want %v", raw, fast, !bad)
		}
	}
}

func TestDecodeFastTrickyLines(t *testing.T) {
	tests := []struct {
		line string
		fast bool // whether the fast path takes it
	}{
		{`{"id":"a\"b\\c\/d\b\f\n\r\t"}`, true},
		{`{"id":"\ud83d\ude00 \u00e9\u0041"}`, true}, // a surrogate pair
		{`{"id":"\ud83d"}`, true},                    // a lone surrogate: U+FFFD
		{`{"id":"\ud83dx\ude00"}`, true},
		{`{"id":"\ude00\ud83d"}`, true},
		{`{"id":"\ud83d\u0041"}`, true},
		{`{"id":"\uD83D\uDE00"}`, true},
		{"{\"id\":\"a\xffb\xc3\"}", true}, // invalid UTF-8: U+FFFD each
		{`{"id":"ü€😀"}`, true},
		{`{"id":"a","message":"x\u0000y"}`, true},
		{"{\"id\":\"a\",\"message\":\"tab\there\"}", false}, // a raw control character
		{`{"id":"a\x"}`, false},
		{`{"id":"a\u12"}`, false},
		{`{"id":"a","attempts":-0}`, true},
		{`{"id":"a","attempts":-5}`, true},
		{`{"id":"a","attempts":0}`, true},
		{`{"id":"a","attempts":1e2}`, false},
		{`{"id":"a","attempts":1.0}`, false},
		{`{"id":"a","attempts":1E2}`, false},
		{`{"id":"a","attempts":01}`, false},
		{`{"id":"a","attempts":-}`, false},
		{`{"id":"a","attempts":999999999999999999}`, true},
		{`{"id":"a","attempts":9223372036854775807}`, false},
		{`{"id":"a","attempts":99999999999999999999}`, false},
		{`{"id":"a","attempts":"2"}`, false},
		{`{"id":"a","attempts":true}`, false},
		{`{"id":"a","payload":{"s":"}{][\"\\","n":[1,{"x":null}],"t":true,"f":false,"e":-1.5e+3}}`, true},
		{`{"id":"a","payload":"{\"a\":1}"}`, true},
		{`{"id":"a","payload":[]}`, true},
		{`{"id":"a","payload":{}}`, true},
		{"{\"id\":\"a\",\"payload\":{\"s\":\"\xff\"}}", true}, // kept byte for byte
		{`{"id":"a","payload":null}`, true},
		{`{"id":"a","payload":{"a":}}`, false},
		{`{"id":"a","payload":{"a":1,}}`, false},
		{`{"id":"a","payload":[1,]}`, false},
		{`{"id":"a","payload":01}`, false},
		{`{"id":"a","payload":1.}`, false},
		{`{"id":"a","payload":nul}`, false},
		{`{"id":"a","payload":{"a" 1}}`, false},
		{" \t{ \"id\" :\n\"a\" , \"payload\" : [ 1 , { \"b\" : 2 } ] ,\"labels\": { \"k\" : \"v\" } }\r\n ", true},
		{`{"id":"a"} x`, false},
		{`{"id":"a"}{"id":"b"}`, false},
		{`{"id":"a"`, false},
		{`{"id":"a",}`, false},
		{`{"id":"a" "topic":"t"}`, false},
		{`{}`, false},
		{`{"id":""}`, false},
		{`{"id":null}`, false},
		{`{"id":"a","topic":null,"message":null,"labels":null,"attempts":null}`, true},
		{`{"ID":"a","Topic":"t","REASON_CODE":"r","Attempts":2}`, true}, // encoding/json ignores case
		{`{"id":"a","ID":"b"}`, false},                                  // a duplicate: the strict decoder decides
		{`{"id":"a","topic":"t","topic":"u"}`, false},
		{`{"\u0069d":"a"}`, false},
		{`{"id":"a","ſource_state":"replayed"}`, false}, // ſ folds to s
		{`{"id":"a","extra":1}`, false},
		{`{"id":"a","Extra":null}`, false},
		{`{"id":"a","labels":{"k":"v","k":"w"}}`, true}, // the later one wins
		{`{"id":"a","labels":{"k\u0041":"v\n","é":""}}`, true},
		{`{"id":"a","labels":{}}`, true},
		{`{"id":"a","labels":{"k":null}}`, false},
		{`{"id":"a","labels":{"k":1}}`, false},
		{`{"id":"a","labels":["k"]}`, false},
		{`{"id":"a","labels":"k"}`, false},
		{`{"id":"a","first_failure":"2026-11-07T06:00:00+01:00"}`, true},
		{`{"id":"a","last_failure":"2026-11-07T06:00:00.123456789Z"}`, true},
		{`{"id":"a","first_failure":"2026-11-07T06:00:00\u005a","last_failure":""}`, true},
		{`{"id":"a","first_failure":null,"last_failure":"2026-11-07T06:00:00Z"}`, true},
		{`{"id":"a","first_failure":"2026-13-07T06:00:00Z"}`, false},
		{`{"id":"a","first_failure":"yesterday"}`, false},
		{`{"id":"a","first_failure":1}`, false},
		{`{"id":"a","source_state":"Replayed"}`, true},
		{`{"id":"a","source_state":{"status":"x"}}`, false},
		{`null`, false},
		{`[{"id":"a"}]`, false},
		{``, false},
		{`{"id":"a","payload":` + strings.Repeat("[", 202) + strings.Repeat("]", 202) + `}`, false}, // deeper than maxDepth
		{`{"id":"a","payload":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, true},
		{`{"id":"a","labels":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9","j":"10"}}`, true},
	}
	for _, tt := range tests {
		if fast := sameAsStrict(t, []byte(tt.line)); fast != tt.fast {
			t.Errorf("%q: fast path took it %v, want %v", tt.line, fast, tt.fast)
		}
	}
	// A few values spelled out, should both paths go wrong alike.
	var e entry.Entry
	if err := decodeJSONL([]byte(`{"id":"\ud83d\ude00\ud83d","labels":{"k":"v","k":"w"},"attempts":-0,"payload":[ 1 ]}`), &e, nil); err != nil ||
		e.ID != "😀\uFFFD" || e.Labels["k"] != "w" || len(e.Labels) != 1 || e.Attempts != 0 || string(e.Payload) != "[ 1 ]" {
		t.Errorf("got %+v, %v", e, err)
	}
}

// For any line, decodeJSONL gives what the strict decoder alone gives:
// the entry, or an error of the same text (quarantine reasons and
// file:line messages are made of it).
func FuzzDecodeJSONLMatchesStrict(f *testing.F) {
	for _, raw := range corpusLines(f, gen.Options{N: 3, Seed: 2, AutoOnly: true, MinPayload: 16, MaxPayload: 200}) {
		f.Add(raw)
	}
	for _, raw := range corpusLines(f, gen.Options{N: 30, Seed: 3, Malformed: 0.1, MinPayload: 16, MaxPayload: 100}) {
		f.Add(raw)
	}
	for _, raw := range sampleLines(f) {
		f.Add(raw)
	}
	for _, s := range []string{`{"id":"\ud83d\ude00","attempts":-0,"labels":{"k":"v","K":"w"}}`, `{"ID":"a","id":"b"}`,
		`{"id":"a","attempts":1e2}`, `{"id":"a","first_failure":"2026-11-07T06:00:00+01:00"}`, "{\"id\":\"\xff\"}",
		`{"id":"a","payload":{"s":"}{"}} x`, `{"id":"a","labels":{"k":null}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 2048 {
			return
		}
		sameAsStrict(t, raw)
	})
}

// BenchmarkDecodeLine is one corpus line (replayCorpus's: seed 2, 512 B
// to 4 KB of payload) decoded by decodeJSONL and by the strict decoder
// alone, one decoder for all lines as a file has.
func BenchmarkDecodeLine(b *testing.B) {
	lines := corpusLines(b, gen.Options{N: 256, Seed: 2, AutoOnly: true})
	var size int
	for _, l := range lines {
		size += len(l)
	}
	for _, c := range []struct {
		name   string
		decode records.DecodeFunc
	}{{"fast", decodeJSONL}, {"strict", decodeStrict}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(size / len(lines)))
			b.ReportAllocs()
			var sd records.StrictDecoder
			i := 0
			for b.Loop() {
				var e entry.Entry
				if err := c.decode(lines[i%len(lines)], &e, &sd); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
