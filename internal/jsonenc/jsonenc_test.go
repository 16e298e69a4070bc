package jsonenc

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAppendStringIsMarshal: every case encoding/json escapes, at the start,
// in the middle and past the eight-byte fast path, written as json.Marshal
// writes it. The callers' fuzz targets (audit, brokermsg) hold it to
// json.Marshal over random input.
func TestAppendStringIsMarshal(t *testing.T) {
	cases := []string{"", "plain", "quote\"back\\slash", "<b>&amp;</b>", "\b\f\n\r\t\x00\x1f\x7f",
		"é ünïcödé 日本", "\u2028\u2029", "bad \xff\xfe utf8", "\xc3", strings.Repeat("x", 17) + "\"" + strings.Repeat("y", 9),
		strings.Repeat("abcdefgh", 4) + "<", "tail\xe2\x80"}
	for _, s := range cases {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, prefix := range []string{"", "0123456789"} {
			got := AppendString(nil, prefix+s)
			want, _ := json.Marshal(prefix + s)
			if string(got) != string(want) {
				t.Errorf("AppendString(%q) = %s, want %s", prefix+s, got, want)
			}
		}
		if got := AppendString([]byte("head:"), s); string(got) != "head:"+string(want) {
			t.Errorf("AppendString after a head = %s", got)
		}
	}
}
