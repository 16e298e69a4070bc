package brokermsg

import (
	"bytes"
	"encoding/json"
	"testing"
)

func sameBytesAsMarshal(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendMarshalString(nil, s); !bytes.Equal(got, want) {
		t.Fatalf("AppendMarshalString(%q) = %s, json.Marshal %s", s, got, want)
	}
}

func TestAppendMarshalStringIsMarshal(t *testing.T) {
	for _, s := range []string{"", "plain", `<a href="x">&amp;</a>`, "\b\f\n\r\t\x00\x1f\x7f", "\u2028\u2029 line sep",
		"bad \xff byte", "\xc3", "\xe2\x80", "é 日本 \xf0\x9f\x98\x80", `back\slash "quoted"`} {
		sameBytesAsMarshal(t, s)
	}
	for b := 0; b < 256; b++ {
		sameBytesAsMarshal(t, "ab"+string(rune(b))+"cd")
		sameBytesAsMarshal(t, "ab"+string([]byte{byte(b)})+"cd")
	}
}

func FuzzAppendMarshalString(f *testing.F) {
	for _, s := range []string{"", "<&>", "\u2028", "\xff", "a\"b\\c\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { sameBytesAsMarshal(t, s) })
}
