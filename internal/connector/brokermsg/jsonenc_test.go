package brokermsg

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// sameAsMarshal checks that AppendString's output decodes to what
// json.Marshal's output of the same string decodes to (json.Marshal writes
// U+FFFD for an invalid UTF-8 byte, and so must AppendString).
func sameAsMarshal(t *testing.T, s string) {
	t.Helper()
	got := AppendString([]byte("x"), []byte(s))[1:]
	var fromOurs, fromStd string
	if err := json.Unmarshal(got, &fromOurs); err != nil {
		t.Fatalf("AppendString(%q) = %s: not JSON: %v", s, got, err)
	}
	want, _ := json.Marshal(s)
	if err := json.Unmarshal(want, &fromStd); err != nil {
		t.Fatal(err)
	}
	if fromOurs != fromStd {
		t.Fatalf("AppendString(%q) decodes to %q, json.Marshal's to %q", s, fromOurs, fromStd)
	}
	if strGot := AppendString(nil, s); !bytes.Equal(strGot, got) {
		t.Fatalf("string and []byte forms differ: %s vs %s", strGot, got)
	}
}

func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range []string{
		"", "plain", "exactly8", "sixteen bytes ok", `quote " inside a long enough run`, `back\slash in the middle of text`,
		"tab\tnew\nline\rcr\x00nul\x1funit\x7fdel", "<html>&amp;</html>", "é ü 日本語 and more text after", "\u2028\u2029",
		"bad \xff byte", "\xc3", "cut \xe6\x97 off", "\xf0\x9f\x98\x80 emoji", "a long run of text with no escapes at all, more than eight bytes" + "\"",
	} {
		sameAsMarshal(t, s)
	}
	// Every single byte, at every position within an 8-byte word.
	for b := 0; b < 256; b++ {
		for pos := 0; pos < 9; pos++ {
			s := []byte("abcdefghijklmnop")
			s[pos] = byte(b)
			sameAsMarshal(t, string(s))
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "x\"y", "\xff\xfe", "日本\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { sameAsMarshal(t, s) })
}

func TestAppendBodyAndBinMatchMarshal(t *testing.T) {
	for _, b := range [][]byte{nil, {}, []byte(`{"a":"<b>"}`), {0xff, 0x00}, []byte("line\n")} {
		var ours, std struct {
			Body
			K Bin `json:"k"`
		}
		enc := AppendBin(AppendKey(AppendBody([]byte("{"), b), "k"), b)
		enc = append(enc, '}')
		if err := json.Unmarshal(enc, &ours); err != nil {
			t.Fatalf("%q: %s: %v", b, enc, err)
		}
		want, _ := json.Marshal(struct {
			Body
			K Bin `json:"k"`
		}{NewBody(b), NewBin(b)})
		if err := json.Unmarshal(want, &std); err != nil {
			t.Fatal(err)
		}
		gb, _ := ours.Body.Bytes()
		wb, _ := std.Body.Bytes()
		gk, _ := ours.K.Bytes()
		wk, _ := std.K.Bytes()
		if !bytes.Equal(gb, wb) || !bytes.Equal(gk, wk) || (gk == nil) != (wk == nil) {
			t.Fatalf("%q: ours %s, json.Marshal %s", b, enc, want)
		}
	}
	ts := time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC)
	want, _ := json.Marshal(ts)
	if got := AppendTime(nil, ts); !bytes.Equal(got, want) {
		t.Fatalf("AppendTime = %s, want %s", got, want)
	}
}

// TestCtlOrHighPrefixFindsEveryByte: the word-at-a-time scan stops at
// exactly the byte a byte-at-a-time scan stops at, for every length up to
// past two 32-byte steps, every position of the first byte to stop at,
// and the bytes on each side of the bounds (a control character borrows
// from the next byte in the subtraction; the next byte may be one too).
func TestCtlOrHighPrefixFindsEveryByte(t *testing.T) {
	naive := func(s []byte) int {
		for i, b := range s {
			if b < 0x20 || b >= 0x80 {
				return i
			}
		}
		return len(s)
	}
	for n := 0; n <= 80; n++ {
		for p := 0; p <= n; p++ {
			for _, stop := range []byte{0x00, 0x01, 0x1f, 0x7f + 1, 0xc3, 0xff} {
				for _, fill := range []byte{' ', '~', 0x7f, '!'} {
					s := bytes.Repeat([]byte{fill}, n)
					if p < n {
						s[p] = stop
						if p+1 < n {
							s[p+1] = 0x00 // a second stop right after
						}
					}
					if got, want := ctlOrHighPrefix(s), naive(s); got != want {
						t.Fatalf("len %d, %#x at %d in %q: %d, want %d", n, stop, p, fill, got, want)
					}
				}
			}
		}
	}
}
