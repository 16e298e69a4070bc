package jsonl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// A JSONL file is decoded through one json.Decoder, not one per line
// (issue 16), and a bad line in the middle costs that line only: every
// kind of bad record is followed by a good one that must still decode.
func TestJSONLOneDecoderPerFileRecoversAfterBadLines(t *testing.T) {
	lines := []string{
		`{"id":"a","topic":"t","payload":{"n":1}}`,
		`{"id":"b","payload":{"n":2}}`,
		`{"id":"x","extra":1}`, // unknown field
		`{"id":"c","payload":{"n":3}}`,
		`{"id":"x"} {"id":"y"}`, // trailing data
		`{"id":"d","payload":{"n":4}}`,
		`{"id":"x","attempts":"2"}`, // wrong type
		`{"id":"e","payload":{"n":5}}`,
		`{"id":"x","payload":{`, // truncated
		`{"id":"f","payload":{"n":6}}`,
		`{"id":"x" nope}`, // syntax error
		`{"id":"g","payload":{"n":7}}`,
	}
	// Both the fast path and the strict decoder alone: the fast path
	// hands every bad line to the strict decoder.
	for _, strictOnly := range []bool{false, true} {
		decode := decodeJSONL
		if strictOnly {
			decode = decodeStrict
		}
		rr := records.Reader{Format: records.Format{Kind: Kind, Layout: records.LayoutLines, Decode: decode}, Name: "e.jsonl",
			R: strings.NewReader(strings.Join(lines, "\n") + "\n"), MaxLine: records.MaxRecord}
		var got []entry.Entry
		var decoders []*json.Decoder
		rr.Each(context.Background(), func(e entry.Entry, err error) bool {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, e)
			decoders = append(decoders, rr.Decoder())
			return true
		})
		if len(got) != len(lines) {
			t.Fatalf("got %d entries, want %d", len(got), len(lines))
		}
		for i, e := range got {
			bad := strings.Contains(lines[i], `"x"`)
			if bad != e.Undecodable() {
				t.Errorf("strict only %v: line %d %s: undecodable %v (%s)", strictOnly, i+1, lines[i], e.Undecodable(), e.DecodeError)
				continue
			}
			if !bad {
				want := fmt.Sprintf(`{"n":%d}`, strings.Index("abcdefg", e.ID)+1)
				if string(e.Payload) != want || e.Origin != fmt.Sprintf("e.jsonl:%d", i+1) {
					t.Errorf("strict only %v: line %d: id %s payload %s origin %s, want payload %s", strictOnly, i+1, e.ID, e.Payload, e.Origin, want)
				}
			}
		}
		// The first good lines share one decoder; it is only replaced
		// after an error (its error is sticky). (The fast path takes
		// them without one.)
		if strictOnly && (decoders[0] == nil || decoders[0] != decoders[1]) {
			t.Errorf("lines 1 and 2 were decoded by different decoders (%p, %p): one per line", decoders[0], decoders[1])
		}
	}
}

// Benchmark against bare encoding/json on the same lines (issue 16: the
// per-line Decoder made the JSONL source 1.2-1.36x slower).
func BenchmarkJSONLDecode(b *testing.B) {
	var sb strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&sb, `{"id":"evt-%06d","topic":"payments.charge.create","reason_code":"timeout","message":"provider timed out","attempts":3,"idempotency_key":"charge-%06d","labels":{"team":"payments"},"payload":{"order":"ord-%d","amount":1500,"currency":"EUR"}}`+"\n", i, i, i)
	}
	data := sb.String()
	b.Run("replayctl", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			rr := records.Reader{Format: Format(), Name: "b.jsonl", R: strings.NewReader(data), MaxLine: records.MaxRecord}
			rr.Each(context.Background(), func(e entry.Entry, err error) bool { return err == nil })
		}
	})
	b.Run("bare-encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			dec := json.NewDecoder(strings.NewReader(data))
			for {
				var r jsonlRecord
				if dec.Decode(&r) != nil {
					break
				}
			}
		}
	})
}

// freshDecode is how a record was decoded before issue 16: a new strict
// json.Decoder for it alone, nothing but white space allowed after it.
func freshDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return records.ErrTrailingData
	}
	return nil
}

// One decoder reused across records decodes each record exactly as a
// fresh decoder would, whatever came before it: a and b are decoded one
// after the other through the same strictDecoder.
func FuzzStrictDecoderMatchesFreshDecoder(f *testing.F) {
	good := `{"id":"a","attempts":2,"labels":{"k":"v"},"payload":{"n":[1,2]}}`
	for _, s := range []string{good, `{"id":"x","extra":1}`, `{"id":"x"} {"id":"y"}`, `{"id":"x"`, `{"id":"x","attempts":"2"}`,
		`{"id": nope}`, `null`, `{"id":"a"}   `, `  {"id":"a"}`, `{}`, ``, `{"id":"a"}x`, `{"payload":{"a":}}`} {
		f.Add(s, good)
		f.Add(good, s)
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		var sd records.StrictDecoder
		for _, raw := range []string{a, b} {
			var got, want jsonlRecord
			gotErr := sd.Decode([]byte(raw), &got)
			wantErr := freshDecode([]byte(raw), &want)
			if (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("%q after %q: reused decoder says %v, a fresh one %v", raw, a, gotErr, wantErr)
			}
			if gotErr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: reused decoder decoded %+v, a fresh one %+v", raw, got, want)
			}
		}
	})
}
