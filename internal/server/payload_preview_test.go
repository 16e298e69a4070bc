package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// A card's preview is the first 4 KB of what prettyPayload shows, built
// from those bytes alone.
func TestPayloadPreviewIsTheCutOfThePrettyPayload(t *testing.T) {
	var big strings.Builder
	big.WriteString(`{"order":{"id":"o-1","lines":[`)
	for i := range 2000 {
		fmt.Fprintf(&big, `{"sku":"sku-%d","note":"a \"quoted\" {brace} [and] , comma: \\ \u00e9","qty":%d,"tags":[],"meta":{}},`, i, i)
	}
	big.WriteString(`{"sku":"last"}]}}`)
	for _, raw := range []string{
		`{}`, `[]`, `"text"`, `12.5`, `null`, ` {"a" : [ 1 , 2 , { } , [ ] ] , "b":{"c":"d"} }`,
		`{"s":"esc \\" still in string, {not structure}","u":"ünï","n":[true,false,null]}`,
		big.String(),                                // ~150 KB: indented, then cut
		`not json at all {`,                         // shown as it is
		strings.Repeat("x", 5000),                   // as it is, cut
		`{"k":"` + strings.Repeat("é", 3000) + `"}`, // cut inside a rune: no broken character
	} {
		full, _, _ := prettyPayload([]byte(raw))
		want, wantCut := full, len(full) > cardPayloadCap
		if wantCut {
			want = strings.ToValidUTF8(want[:cardPayloadCap], "")
		}
		got, cut := payloadPreview([]byte(raw), cardPayloadCap)
		if got != want || cut != wantCut {
			t.Errorf("payload %.40q...: preview (cut %v)\n%.200q\nwant (cut %v)\n%.200q", raw, cut, got, wantCut, want)
		}
	}
	// Small payloads whole: the same as json.Indent.
	for _, raw := range []string{`{"a":{"b":[1,{"c":[]}]},"d":"x"}`, `[{"x":{}},[[]],"y"]`} {
		var buf bytes.Buffer
		if err := json.Indent(&buf, []byte(raw), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got, cut := payloadPreview([]byte(raw), cardPayloadCap); got != buf.String() || cut {
			t.Errorf("%s: %q, want %q", raw, got, buf.String())
		}
	}
	// The preview of a 150 KB payload does not build its whole indented
	// form (it did: json.Indent of all of it, then a 4 KB cut).
	raw := []byte(big.String())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		payloadPreview(raw, cardPayloadCap)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 20; per > 64<<10 {
		t.Fatalf("a 4 KB preview of a %d-byte payload allocated %d bytes", big.Len(), per)
	}
}
