package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/entry"
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

// Payloads come back byte for byte whatever they hold: a replay sends
// them verbatim (a signature over them must still hold). Bytes that look
// like a compressed frame, or that do not compress, included.
func TestPayloadsRoundTripVerbatim(t *testing.T) {
	s, err := OpenBolt(filepath.Join(t.TempDir(), "replayctl.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	random := make([]byte, 300)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(random)
	payloads := map[string][]byte{
		"json":           []byte(`{"a":  1, "text": "` + string(bytes.Repeat([]byte("spaced   out "), 40)) + `"}`),
		"empty":          {},
		"short":          []byte(`1`),
		"zstd magic":     append([]byte{0x28, 0xb5, 0x2f, 0xfd}, bytes.Repeat([]byte("x"), 100)...),
		"tag byte 1":     append([]byte{payloadZstd}, bytes.Repeat([]byte("y"), 100)...),
		"incompressible": random,
	}
	ctx := context.Background()
	for id, p := range payloads {
		if err := s.Update(ctx, func(tx Tx) error {
			return tx.PutEntry(&EntryRecord{Entry: entry.Entry{ID: id, Source: "jsonl", Payload: p}, Status: StatusPending})
		}); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range payloads {
		if err := s.View(ctx, func(tx Tx) error {
			er, err := tx.Entry("jsonl:" + id)
			if err != nil {
				return err
			}
			if !bytes.Equal(er.Entry.Payload, want) {
				t.Errorf("%s: payload %q, want %q", id, er.Entry.Payload, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketPayloadsZ).Get([]byte("jsonl:json")); len(v) == 0 || v[0] != payloadZstd || len(v) >= len(payloads["json"]) {
			t.Errorf("a compressible payload is stored as %d bytes (tag %v)", len(v), v[:1])
		}
		if v := tx.Bucket(bucketPayloadsZ).Get([]byte("jsonl:incompressible")); len(v) != len(random)+1 || v[0] != payloadRaw {
			t.Errorf("an incompressible payload is stored as %d bytes, want it raw", len(v))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A damaged or unknown payload value is an error naming the entry, never
// a wrong payload sent.
func TestDamagedPayloadIsAnError(t *testing.T) {
	if _, err := decodePayload([]byte{9, 1, 2}); !errors.Is(err, errPayloadCodec) {
		t.Errorf("unknown tag: %v", err)
	}
	if _, err := decodePayload(nil); !errors.Is(err, errPayloadCodec) {
		t.Errorf("empty value: %v", err)
	}
	v, err := encodePayload(bytes.Repeat([]byte("abc "), 100))
	if err != nil {
		t.Fatal(err)
	}
	v[len(v)/2] ^= 0xff
	if _, err := decodePayload(v); err == nil {
		t.Error("a flipped byte in a compressed payload decoded")
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
			if _, err := encodeRecord(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	z, _ := encodeRecord(v)
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
