package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// A split record (an audit record's tail compressed before its head is
// known) reads back as the JSON it was made from, and a damaged one fails
// to read rather than reading as other JSON.
func TestSplitRecordRoundTrip(t *testing.T) {
	// A real record's shape: the dictionary's last line is a decision
	// record.
	rec := zdictV1[bytes.LastIndexByte(zdictV1[:len(zdictV1)-1], '\n')+1 : len(zdictV1)-1]
	r := rand.New(rand.NewPCG(3, 4))
	split := 0
	for range 300 {
		cut := 1 + r.IntN(len(rec)-1)
		head, tail := bytes.Clone(rec[:cut]), bytes.Clone(rec[cut:])
		if r.IntN(4) == 0 { // not the dictionary's own text
			for i := range tail {
				tail[i] = byte('a' + r.IntN(26))
			}
		}
		want := append(bytes.Clone(head), tail...)
		tl := CompressTailAside(tail)
		if tl == nil {
			continue
		}
		raw := SplitRecord(head, tl)
		got, err := RecordJSON(raw)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("cut at %d: read back %q (%v), want %q", cut, got, err, want)
		}
		if !bytes.HasPrefix(raw, s2Magic) || raw[len(s2Magic)] != s2SplitV1ID {
			continue // stored as JSON: compressing did not pay
		}
		split++
		for name, edit := range map[string]func(v []byte) []byte{
			"checksum":  func(v []byte) []byte { v[len(s2Magic)+1] ^= 0x01; return v },
			"head byte": func(v []byte) []byte { v[s2Header+1] ^= 0x20; return v },
			"tail byte": func(v []byte) []byte { v[len(v)-1] ^= 0x01; return v },
			"truncated": func(v []byte) []byte { return v[:len(v)-3] },
			"head length": func(v []byte) []byte {
				return append(binary.AppendUvarint(v[:s2Header:s2Header], 1<<40), v[s2Header+1:]...)
			},
		} {
			if got, err := RecordJSON(edit(bytes.Clone(raw))); err == nil && !bytes.Equal(got, want) {
				t.Fatalf("%s: damaged split record read as %q", name, got)
			} else if err != nil && !errors.Is(err, ErrRecordCodec) {
				t.Fatalf("%s: %v, want ErrRecordCodec", name, err)
			}
		}
	}
	if split < 100 {
		t.Fatalf("only %d of 300 records stored split", split)
	}
}
