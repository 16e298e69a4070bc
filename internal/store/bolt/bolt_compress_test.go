package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/idempotency"
	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/store"
)

// Payloads come back byte for byte whatever they hold: a replay sends
// them verbatim (a signature over them must still hold). Bytes that look
// like a compressed frame, or that do not compress, included.
func TestPayloadsRoundTripVerbatim(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{})
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
		if err := s.Update(ctx, func(tx store.Tx) error {
			return tx.PutEntry(&store.EntryRecord{Entry: entry.Entry{ID: id, Source: "jsonl", Payload: p}, Status: store.StatusPending})
		}); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range payloads {
		if err := s.View(ctx, func(tx store.Tx) error {
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

// A file holds records in three formats side by side: plain JSON (files
// from before compression), zstd frames (audit, approvals, snapshots, and
// ledger and entry records written before s2), and s2 records (ledger and
// entry records now). Every record reads back the same whichever format
// it is in, the audit chain verifies across all three, and new writes
// continue it.
func TestStoreMixingRecordFormatsReadsAndVerifies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replayctl.db")
	s, err := Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	text := strings.Repeat("a payload long enough to compress ", 4)
	write := func(s *Bolt, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			k := fmt.Sprintf("k%d", i)
			if err := s.Update(ctx, func(tx store.Tx) error {
				if _, err := tx.Transition(idempotency.Transition{Key: k, To: idempotency.Decided, EntryRef: "jsonl:" + k, PayloadHash: "sha256:" + k}); err != nil {
					return err
				}
				if _, err := tx.Append(&audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: "jsonl:" + k, Action: "auto_replay", Reason: text}); err != nil {
					return err
				}
				return tx.PutEntry(&store.EntryRecord{Entry: entry.Entry{ID: k, Source: "jsonl", Topic: "tool.email.send", ReasonCode: text, Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`)}, Status: store.StatusPending})
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
				data, err := store.RecordJSON(vals[i])
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
						v, err = store.CompressRecord(data)
					}
				case 2:
					v, err = store.CompressHotRecord(data)
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
		s, err := Open(path, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.View(ctx, func(tx store.Tx) error {
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
	s, err = Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	write(s, 9, 12)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check(12)
}

// TestS2RecordsInTheFile: a dictionary-like record is stored as s2 in
// the ledger, entries and audit buckets, and a damaged one in the file
// fails its read, naming its key (TestS2RecordsAndTheirDamage, beside the
// codec, checks the codec alone).
func TestS2RecordsInTheFile(t *testing.T) {
	rec := zdictV1[bytes.LastIndexByte(zdictV1[:len(zdictV1)-1], '\n')+1:]
	s, err := Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		if _, err := tx.Transition(idempotency.Transition{Key: "k", To: idempotency.Decided, EntryRef: "jsonl:k", PayloadHash: "sha256:" + strings.Repeat("0", 64)}); err != nil {
			return err
		}
		if _, err := tx.Append(&audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: "jsonl:k", Action: "auto_replay", Reason: string(rec)}); err != nil {
			return err
		}
		return tx.PutEntry(&store.EntryRecord{Entry: entry.Entry{ID: "k", Source: "jsonl", ReasonCode: string(rec)}, Status: store.StatusPending})
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
	err = s.View(context.Background(), func(tx store.Tx) error { _, err := tx.Ledger("k"); return err })
	if !errors.Is(err, store.ErrRecordCodec) || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("damaged ledger record: %v", err)
	}
}
