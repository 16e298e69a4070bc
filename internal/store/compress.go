package store

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"
)

// Record values in the bbolt file (entries, ledger, approvals, audit,
// snapshots) are JSON compressed with zstd against a small dictionary of
// typical records (issue 16: the store was ~4.6-5.3x its input, about
// half of it JSON field names, values and hashes repeated in every record;
// with the dictionary a decision record shrinks from 1.7 KB to 0.4 KB,
// where zstd alone gets to ~0.6 KB). A value
// is stored compressed only when that is smaller; a JSON value never
// starts with zstd's frame magic, so plain JSON written by older versions
// (or by code that still writes plain JSON) reads as before.
//
// Payloads are kept in their own bucket with a one-byte codec tag (a
// payload may be any bytes, so no magic can tell): zstd without the
// dictionary, which describes replayctl's records, not users' payloads.
// Decompression gives back the payload byte for byte, so a replay still
// sends it verbatim.

// zdictV1 is dictionary 1. Never edit it: every value compressed with it
// names it by id and can only be read with these exact bytes (a test pins
// its hash). A better dictionary is added under a new id, both kept.
//
//go:embed zdict_v1.txt
var zdictV1 []byte

const (
	zdictV1ID = 1
	// minCompress: below this a frame's own header costs more than it saves.
	minCompress = 64
	// maxDecoded bounds what a (corrupt) frame may claim to expand to.
	maxDecoded = 1 << 30
)

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// The encoders run at the fastest level: at the default level, resetting
// the dictionary's match tables for each record cost a quarter of
// reconcile's CPU, for the same sizes.
//
// The encoders and the decoder are built once, on first use, and shared:
// an encoder holds MBs of tables, and EncodeAll/DecodeAll are safe for
// concurrent use. A read-only command never builds an encoder. These are
// the package's only shared values; they never change once built.
var (
	recordEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderDictRaw(zdictV1ID, zdictV1))
	})
	payloadEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithLowerEncoderMem(true))
	})
	valueDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderMaxMemory(maxDecoded),
			zstd.WithDecoderDictRaw(zdictV1ID, zdictV1))
	})
)

// jsonBuffers holds the buffers records are encoded into before they are
// compressed: the JSON is garbage once compressed (most records), so it
// need not be allocated per record (GC was an eighth of reconcile's CPU).
// Like the codecs above it is shared and safe for concurrent use.
var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer: a buffer grown by an unusually large record is dropped
// rather than kept.
const maxPooledBuffer = 1 << 20

// encodeRecord is a value as stored: v's JSON, compressed when smaller.
func encodeRecord(v any) ([]byte, error) {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer putJSONBuffer(buf)
	// Encoder output is json.Marshal's (HTML escaped) plus a newline.
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		return nil, err
	}
	buf.Truncate(buf.Len() - 1)
	return compressRecord(buf.Bytes())
}

func putJSONBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBuffer {
		buf.Reset()
		jsonBuffers.Put(buf)
	}
}

// compressRecord is a record's JSON as stored, in a new slice (bbolt keeps
// the value until commit): compressed when that is smaller.
func compressRecord(data []byte) ([]byte, error) {
	if len(data) < minCompress {
		return bytes.Clone(data), nil
	}
	enc, err := recordEncoder()
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	if z := enc.EncodeAll(data, make([]byte, 0, len(data)/2)); len(z) < len(data) {
		return z, nil
	}
	return bytes.Clone(data), nil
}

// recordJSON is a stored value's JSON (either format).
func recordJSON(raw []byte) ([]byte, error) {
	if !bytes.HasPrefix(raw, zstdMagic) {
		return raw, nil
	}
	dec, err := valueDecoder()
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	data, err := dec.DecodeAll(raw, nil)
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	return data, nil
}

// DecodeValue decodes a record value as the bbolt store keeps it (plain or
// compressed JSON), for tools and tests that read the file directly.
func DecodeValue(raw []byte, out any) error {
	data, err := recordJSON(raw)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// EncodeValue is DecodeValue's inverse.
func EncodeValue(v any) ([]byte, error) { return encodeRecord(v) }

func putRecord(b *bolt.Bucket, key []byte, v any) error {
	if b == nil {
		return ErrReadOnly
	}
	data, err := encodeRecord(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

// Payload codec tags (the first byte of a value in bucketPayloadsZ).
const (
	payloadRaw  byte = 0
	payloadZstd byte = 1
)

// bucketPayloadsZ holds payloads with a codec tag; bucketPayloads (older
// files) holds them raw and is still read.
var bucketPayloadsZ = []byte("payloads_z")

func encodePayload(p []byte) ([]byte, error) {
	if len(p) >= minCompress {
		enc, err := payloadEncoder()
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		z := enc.EncodeAll(p, append(make([]byte, 0, len(p)/2+1), payloadZstd))
		if len(z) < len(p)+1 {
			return z, nil
		}
	}
	return append([]byte{payloadRaw}, p...), nil
}

// errPayloadCodec says a stored payload carries a tag this version does
// not know (written by a newer replayctl, or damaged).
var errPayloadCodec = errors.New("unknown payload codec")

func decodePayload(v []byte) ([]byte, error) {
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: empty value", errPayloadCodec)
	}
	switch v[0] {
	case payloadRaw:
		return bytes.Clone(v[1:]), nil
	case payloadZstd:
		dec, err := valueDecoder()
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		p, err := dec.DecodeAll(v[1:], nil)
		if err != nil {
			return nil, fmt.Errorf("decompress payload: %w", err)
		}
		if p == nil {
			p = []byte{}
		}
		return p, nil
	}
	return nil, fmt.Errorf("%w %d", errPayloadCodec, v[0])
}

// readPayload returns a copy of the payload stored under key, from either
// bucket (nil when there is none).
func readPayload(tx *bolt.Tx, key []byte) ([]byte, error) {
	if b := tx.Bucket(bucketPayloadsZ); b != nil {
		if v := b.Get(key); v != nil {
			p, err := decodePayload(v)
			if err != nil {
				return nil, fmt.Errorf("payload of %q: %w", key, err)
			}
			return p, nil
		}
	}
	if b := tx.Bucket(bucketPayloads); b != nil {
		if v := b.Get(key); v != nil {
			return bytes.Clone(v), nil
		}
	}
	return nil, nil
}

// writePayload stores p under key unless the same bytes are there; a
// copy an older version kept in the raw bucket is moved over.
func writePayload(tx *bolt.Tx, key, p []byte) error {
	zb := tx.Bucket(bucketPayloadsZ)
	if zb == nil {
		return ErrReadOnly
	}
	if cur, err := readPayload(tx, key); err == nil && cur != nil && bytes.Equal(cur, p) {
		return nil
	}
	v, err := encodePayload(p)
	if err != nil {
		return err
	}
	if err := zb.Put(key, v); err != nil {
		return err
	}
	if ob := tx.Bucket(bucketPayloads); ob != nil && ob.Get(key) != nil {
		return ob.Delete(key)
	}
	return nil
}

// setFillPercent sets how full bbolt packs the pages it splits. Its
// default, 0.5, leaves every split page half empty, and pages whose keys
// only grow at the end are never filled again: the audit chain (keys are
// sequence numbers) is packed full; payloads, entries and ledger records
// (keyed by ref and key, arriving mostly in source order), the indexes and
// approvals almost full, so that an insert into the middle of a full page
// does not split it at once. Measured at 10k entries: page fill 0.46-0.54
// -> 0.81-0.97.
func setFillPercent(tx *bolt.Tx) {
	for _, f := range []struct {
		name []byte
		fill float64
	}{{bucketAudit, 1.0}, {bucketPayloadsZ, 0.95}, {bucketEntries, 0.9}, {bucketLedger, 0.9}, {bucketIdx, 0.9}, {bucketApprovals, 0.9}} {
		if b := tx.Bucket(f.name); b != nil {
			b.FillPercent = f.fill
		}
	}
}
