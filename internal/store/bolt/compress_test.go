package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
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
		"tag byte 2":     append([]byte{payloadS2}, bytes.Repeat([]byte("z"), 100)...),
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
		if v := tx.Bucket(bucketPayloadsZ).Get([]byte("jsonl:json")); len(v) == 0 || v[0] != payloadS2 || len(v) >= len(payloads["json"]) {
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
	p := []byte(`{"text": "` + strings.Repeat("abc dead letter ", 100) + `"}`)
	v, err := encodePayload(p)
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != payloadS2 {
		t.Fatalf("payload stored with tag %d, want s2", v[0])
	}
	if got, err := decodePayload(v); err != nil || !bytes.Equal(got, p) {
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
		if got, err := decodePayload(damage(bytes.Clone(v))); err == nil {
			t.Errorf("%s: decoded to %d bytes, want an error", name, len(got))
		}
	}
	// Payloads written as zstd (before s2, and above maxS2Payload) read.
	enc, err := payloadEncoder()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodePayload(enc.EncodeAll(p, []byte{payloadZstd})); err != nil || !bytes.Equal(got, p) {
		t.Errorf("zstd payload: %v", err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), maxS2Payload/16+1)
	if v, err := encodePayload(big); err != nil || v[0] != payloadZstd {
		t.Errorf("payload over %d bytes: tag %d, %v; want zstd", maxS2Payload, v[0], err)
	} else if got, err := decodePayload(v); err != nil || !bytes.Equal(got, big) {
		t.Errorf("large payload round trip: %v", err)
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

// A file holds records in three formats side by side: plain JSON (files
// from before compression), zstd frames (audit, approvals, snapshots, and
// ledger and entry records written before s2), and s2 records (ledger and
// entry records now). Every record reads back the same whichever format
// it is in, the audit chain verifies across all three, and new writes
// continue it.
func TestStoreMixingRecordFormatsReadsAndVerifies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replayctl.db")
	s, err := OpenBolt(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	text := strings.Repeat("a payload long enough to compress ", 4)
	write := func(s *Bolt, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			k := fmt.Sprintf("k%d", i)
			if err := s.Update(ctx, func(tx Tx) error {
				if _, err := tx.Transition(idempotency.Transition{Key: k, To: idempotency.Decided, EntryRef: "jsonl:" + k, PayloadHash: "sha256:" + k}); err != nil {
					return err
				}
				if _, err := tx.Append(&audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: "jsonl:" + k, Action: "auto_replay", Reason: text}); err != nil {
					return err
				}
				return tx.PutEntry(&EntryRecord{Entry: entry.Entry{ID: k, Source: "jsonl", Topic: "tool.email.send", ReasonCode: text, Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`)}, Status: StatusPending})
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(s, 0, 9)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Rewrite the stored values so that each bucket holds every format:
	// the i-th value of a bucket as plain JSON, zstd or s2 by i mod 3.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The record encoder of the version before the s2 records: zstd with
	// entropy coding (huff0 literals, FSE sequences), which this version's
	// encoder no longer writes.
	entropyEnc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderDictRaw(zdictV1ID, zdictV1))
	if err != nil {
		t.Fatal(err)
	}
	defer entropyEnc.Close()
	formats := map[string]int{}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketLedger, bucketEntries, bucketAudit} {
			b := tx.Bucket(name)
			var keys, vals [][]byte
			if err := b.ForEach(func(k, v []byte) error {
				keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
				return nil
			}); err != nil {
				return err
			}
			for i, k := range keys {
				data, err := recordJSON(vals[i])
				if err != nil {
					return err
				}
				var v []byte
				switch i % 3 {
				case 0:
					v = bytes.Clone(data)
				case 1:
					// zstd frames as this version writes them (no entropy
					// coding), and as the version before it did (with).
					if (i/3)%2 == 0 {
						v = entropyEnc.EncodeAll(data, nil)
					} else {
						v, err = compressRecord(data)
					}
				case 2:
					v, err = compressHotRecord(data)
				}
				if err != nil {
					return err
				}
				switch {
				case bytes.HasPrefix(v, s2Magic):
					formats["s2"]++
				case bytes.HasPrefix(v, zstdMagic):
					formats["zstd"]++
				default:
					formats["json"]++
				}
				if err := b.Put(k, v); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if formats["s2"] != 9 || formats["zstd"] != 9 || formats["json"] != 9 {
		t.Fatalf("formats written: %v, want 9 of each", formats)
	}

	check := func(n int) {
		t.Helper()
		if res := verifyFile(t, path, nil); !res.OK() || res.Records != n {
			t.Fatalf("mixed chain: %+v", res)
		}
		s, err := OpenBolt(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.View(ctx, func(tx Tx) error {
			for i := range n {
				k := fmt.Sprintf("k%d", i)
				r, err := tx.Ledger(k)
				if err != nil {
					return err
				}
				if r == nil || r.State != idempotency.Decided || r.PayloadHash != "sha256:"+k {
					t.Errorf("ledger %s: %+v", k, r)
				}
				er, err := tx.Entry("jsonl:" + k)
				if err != nil {
					return err
				}
				if er == nil || er.Entry.ReasonCode != text || string(er.Entry.Payload) != `{"n":`+strconv.Itoa(i)+`}` {
					t.Errorf("entry %s: %+v", k, er)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	check(9)
	// The current code keeps writing into the mixed file.
	s, err = OpenBolt(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	write(s, 9, 12)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check(12)
}

// Ledger, entry and audit records are written as s2 records, and a damaged s2 record is an error, never other JSON: a
// flipped byte in the block, a wrong checksum, an unknown dictionary, a
// truncated record or one claiming a huge size.
func TestS2RecordsAndTheirDamage(t *testing.T) {
	rec := zdictV1[bytes.LastIndexByte(zdictV1[:len(zdictV1)-1], '\n')+1:]
	v, err := compressHotRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(v, s2Magic) || len(v) >= len(rec)/2 {
		t.Fatalf("a dictionary-like record is stored as %d bytes of %d (%q)", len(v), len(rec), v[:4])
	}
	if got, err := recordJSON(v); err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("round trip: %v", err)
	}
	short := []byte(`{"a":1}`)
	if v, _ := compressHotRecord(short); !bytes.Equal(v, short) {
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
		if _, err := recordJSON(edit(bytes.Clone(v))); !errors.Is(err, errRecordCodec) {
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
		_, err := recordJSON(bad)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, errRecordCodec) {
			t.Errorf("a record claiming %d bytes: %v, want an error", claim, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("reading a %d-byte record claiming %d bytes allocated %d bytes", len(bad), claim, grew)
		}
	}

	s, err := OpenBolt(filepath.Join(t.TempDir(), "replayctl.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Update(context.Background(), func(tx Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: "k", To: idempotency.Decided, EntryRef: "jsonl:k", PayloadHash: "sha256:" + strings.Repeat("0", 64)}); err != nil {
			return err
		}
		if _, err := tx.Append(&audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: "jsonl:k", Action: "auto_replay", Reason: string(rec)}); err != nil {
			return err
		}
		return tx.PutEntry(&EntryRecord{Entry: entry.Entry{ID: "k", Source: "jsonl", ReasonCode: string(rec)}, Status: StatusPending})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		for name, v := range map[string][]byte{"ledger": tx.Bucket(bucketLedger).Get([]byte("k")), "entry": tx.Bucket(bucketEntries).Get([]byte("jsonl:k"))} {
			if !bytes.HasPrefix(v, s2Magic) {
				t.Errorf("%s record stored as %q, want s2", name, v[:min(len(v), 4)])
			}
		}
		if v := tx.Bucket(bucketAudit).Get(seqKey(1)); !bytes.HasPrefix(v, s2Magic) {
			t.Errorf("audit record stored as %q, want s2", v[:min(len(v), 4)])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A damaged ledger record in the file fails its read, naming the key.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLedger)
		v := bytes.Clone(b.Get([]byte("k")))
		v[len(v)-2] ^= 0x01
		return b.Put([]byte("k"), v)
	}); err != nil {
		t.Fatal(err)
	}
	err = s.View(context.Background(), func(tx Tx) error { _, err := tx.Ledger("k"); return err })
	if !errors.Is(err, errRecordCodec) || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("damaged ledger record: %v", err)
	}
}

// Whatever bytes a stored value holds (a damaged file, an edit by hand),
// reading it returns JSON or an error, never a panic; and any record
// stored as s2 reads back byte for byte.
func FuzzStoredRecord(f *testing.F) {
	rec := zdictV1[bytes.LastIndexByte(zdictV1[:len(zdictV1)-1], '\n')+1:]
	f.Add(rec)
	if v, err := compressHotRecord(rec); err == nil {
		f.Add(v)
	}
	if v, err := compressRecord(rec); err == nil {
		f.Add(v)
	}
	f.Add(append(bytes.Clone(s2Magic), s2DictV1ID, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = recordJSON(raw)
		if bytes.HasPrefix(raw, s2Magic) || bytes.HasPrefix(raw, zstdMagic) {
			return // not a record's JSON (JSON never starts so), only read
		}
		v, err := compressHotRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := recordJSON(v)
		if err != nil {
			t.Fatalf("stored %q as %q, read back: %v", raw, v, err)
		}
		if !bytes.Equal(got, raw) {
			t.Fatalf("round trip of %q: %q", raw, got)
		}
	})
}
