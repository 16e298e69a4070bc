package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// Every value compressed with dictionary 1 needs these exact bytes to be
// read again: an edit to zdict_v1.txt would make existing files
// unreadable, so it fails here (add a new dictionary under a new id).
func TestDictionaryV1IsFrozen(t *testing.T) {
	sum := sha256.Sum256(zdictV1)
	if got := hex.EncodeToString(sum[:]); got != "a1bc7ba0ee9d706995e89c530fd0da688f0d42d6ad5716ddb7b4db56f6368dba" {
		t.Fatalf("zdict_v1.txt changed (sha256 %s)", got)
	}
}

// BenchmarkEncodeDecisionRecord is the CPU a stored decision record costs
// with compression (go test -bench Record ./internal/store/).
func BenchmarkEncodeDecisionRecord(b *testing.B) {
	rec := zdictV1[bytes.LastIndexByte(zdictV1[:len(zdictV1)-1], '\n')+1:]
	var v map[string]any
	if err := json.Unmarshal(rec, &v); err != nil {
		b.Fatal(err)
	}
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json+zstd", func(b *testing.B) {
		for b.Loop() {
			if _, err := EncodeRecord(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	z, _ := EncodeRecord(v)
	b.Run("decode json+zstd", func(b *testing.B) {
		var out map[string]any
		for b.Loop() {
			if err := DecodeValue(z, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode json", func(b *testing.B) {
		var out map[string]any
		for b.Loop() {
			if err := DecodeValue(rec, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Ledger, entry and audit records are written as s2 records, and a damaged s2 record is an error, never other JSON: a
// flipped byte in the block, a wrong checksum, an unknown dictionary, a
// truncated record or one claiming a huge size.
func TestS2RecordsAndTheirDamage(t *testing.T) {
	rec := zdictV1[bytes.LastIndexByte(zdictV1[:len(zdictV1)-1], '\n')+1:]
	v, err := CompressHotRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(v, s2Magic) || len(v) >= len(rec)/2 {
		t.Fatalf("a dictionary-like record is stored as %d bytes of %d (%q)", len(v), len(rec), v[:4])
	}
	if got, err := RecordJSON(v); err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("round trip: %v", err)
	}
	short := []byte(`{"a":1}`)
	if v, _ := CompressHotRecord(short); !bytes.Equal(v, short) {
		t.Errorf("a short record is stored as %q, want it plain", v)
	}
	damaged := map[string]func([]byte) []byte{
		"block byte": func(v []byte) []byte { v[len(v)-len(v)/3] ^= 0x01; return v },
		"checksum":   func(v []byte) []byte { v[len(s2Magic)+1] ^= 0x01; return v },
		"dictionary": func(v []byte) []byte { v[len(s2Magic)] = 2; return v },
		"truncated":  func(v []byte) []byte { return v[:s2Header-1] },
		"cut block":  func(v []byte) []byte { return v[:len(v)-5] },
		"huge":       func(v []byte) []byte { return append(v[:s2Header], 0xff, 0xff, 0xff, 0xff, 0x0f) },
	}
	for name, edit := range damaged {
		if _, err := RecordJSON(edit(bytes.Clone(v))); !errors.Is(err, ErrRecordCodec) {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
	// A 15-byte record claiming just under a GiB, or anything above the
	// largest s2 record written (maxS2Record): refused before the decoder
	// allocates what it claims (review: a read allocated 1 GiB first).
	for _, claim := range []uint64{maxS2Record + 1, maxDecoded - 1} {
		bad := binary.AppendUvarint(bytes.Clone(v[:s2Header]), claim)
		bad = append(bad, 0x00, 0x00)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := RecordJSON(bad)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrRecordCodec) {
			t.Errorf("a record claiming %d bytes: %v, want an error", claim, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("reading a %d-byte record claiming %d bytes allocated %d bytes", len(bad), claim, grew)
		}
	}

}

// Whatever bytes a stored value holds (a damaged file, an edit by hand),
// reading it returns JSON or an error, never a panic; and any record
// stored as s2 reads back byte for byte.
func FuzzStoredRecord(f *testing.F) {
	rec := zdictV1[bytes.LastIndexByte(zdictV1[:len(zdictV1)-1], '\n')+1:]
	f.Add(rec)
	if v, err := CompressHotRecord(rec); err == nil {
		f.Add(v)
	}
	if v, err := CompressRecord(rec); err == nil {
		f.Add(v)
	}
	f.Add(append(bytes.Clone(s2Magic), s2DictV1ID, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = RecordJSON(raw)
		if bytes.HasPrefix(raw, s2Magic) || bytes.HasPrefix(raw, zstdMagic) {
			return // not a record's JSON (JSON never starts so), only read
		}
		v, err := CompressHotRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := RecordJSON(v)
		if err != nil {
			t.Fatalf("stored %q as %q, read back: %v", raw, v, err)
		}
		if !bytes.Equal(got, raw) {
			t.Fatalf("round trip of %q: %q", raw, got)
		}
	})
}

// A damaged or unknown payload value is an error naming the entry, never
// a wrong payload sent.
func TestDamagedPayloadIsAnError(t *testing.T) {
	if _, err := DecodePayload([]byte{9, 1, 2}); !errors.Is(err, ErrPayloadCodec) {
		t.Errorf("unknown tag: %v", err)
	}
	if _, err := DecodePayload(nil); !errors.Is(err, ErrPayloadCodec) {
		t.Errorf("empty value: %v", err)
	}
	p := []byte(`{"text": "` + strings.Repeat("abc dead letter ", 100) + `"}`)
	v, err := EncodePayload(p)
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != payloadS2 {
		t.Fatalf("payload stored with tag %d, want s2", v[0])
	}
	if got, err := DecodePayload(v); err != nil || !bytes.Equal(got, p) {
		t.Fatalf("round trip: %v", err)
	}
	// s2 blocks carry no checksum: the CRC-32C in front must catch what
	// the block format would decode as other bytes.
	for name, damage := range map[string]func([]byte) []byte{
		"flipped byte in the block": func(v []byte) []byte { v[len(v)/2] ^= 0xff; return v },
		"flipped last byte":         func(v []byte) []byte { v[len(v)-1] ^= 0x01; return v },
		"checksum":                  func(v []byte) []byte { v[1] ^= 0x01; return v },
		"truncated":                 func(v []byte) []byte { return v[:len(v)-3] },
		"no block":                  func(v []byte) []byte { return v[:5] },
		"header only":               func(v []byte) []byte { return v[:3] },
		"claims a GiB":              func(v []byte) []byte { return append(v[:5:5], 0x80, 0x80, 0x80, 0x80, 0x04, 0x00) },
	} {
		if got, err := DecodePayload(damage(bytes.Clone(v))); err == nil {
			t.Errorf("%s: decoded to %d bytes, want an error", name, len(got))
		}
	}
	// Payloads written as zstd (before s2, and above maxS2Payload) read.
	enc, err := payloadEncoder()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodePayload(enc.EncodeAll(p, []byte{payloadZstd})); err != nil || !bytes.Equal(got, p) {
		t.Errorf("zstd payload: %v", err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), maxS2Payload/16+1)
	if v, err := EncodePayload(big); err != nil || v[0] != payloadZstd {
		t.Errorf("payload over %d bytes: tag %d, %v; want zstd", maxS2Payload, v[0], err)
	} else if got, err := DecodePayload(v); err != nil || !bytes.Equal(got, big) {
		t.Errorf("large payload round trip: %v", err)
	}
}
