package store

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/replayctl/replayctl/internal/idempotency"
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
// Ledger and entry records, which every dispatch rewrites twice (intent,
// then outcome), and audit records (three per replayed entry) are
// compressed with s2 against the same dictionary instead (issue 16: zstd
// copies its dictionary's 256 KB match table back for every record,
// 9.2 µs a record against 1.4 µs for s2; the records come out ~25%
// larger, 0.42 of their JSON against 0.33, the same as zstd without
// entropy coding). Approvals and snapshots, written once, keep zstd. All
// three formats read side by side: see RecordJSON.
//
// Payloads are kept in their own bucket with a one-byte codec tag (a
// payload may be any bytes, so no magic can tell): s2 (zstd for the
// largest, and in files written before) without the dictionary, which
// describes replayctl's records, not users' payloads.
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

// An s2 record is s2Magic, the dictionary's id (one byte), the CRC-32C of
// the record's JSON (4 bytes, little endian: s2 blocks carry no checksum,
// and a damaged ledger record must fail to read, not read as other JSON),
// then one s2 block. JSON never starts with 0xff.
var s2Magic = []byte{0xff, 's', '2'}

const (
	s2DictV1ID = 1
	s2Header   = 8
	// maxS2Record: s2 encodes one block of at most 4 MB; records larger
	// than this (never a ledger or entry record in practice) take zstd.
	maxS2Record = 64 << 10
)

// The encoders run at the fastest level: at the default level, resetting
// the dictionary's match tables for each record cost a quarter of
// reconcile's CPU, for the same sizes. The record encoder also skips
// entropy coding (huff0 of the literals, FSE of the sequences): on records
// of a few hundred bytes it cost 29% of a record's compression (9.2 ->
// 6.6 µs) for 21% fewer bytes, and the store stays well under its 2x
// target (1.30x -> 1.46x at 10k transient entries). Its frames are
// ordinary zstd frames, read by the same decoder as before.
//
// The encoders and the decoder are built once, on first use, and shared:
// an encoder holds MBs of tables, and EncodeAll/DecodeAll are safe for
// concurrent use. A read-only command never builds an encoder. These are
// the package's only shared values; they never change once built.
var (
	recordEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderDictRaw(zdictV1ID, zdictV1), zstd.WithNoEntropyCompression(true))
	})
	payloadEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithLowerEncoderMem(true))
	})
	// recordDictS2 is dictionary 1 for s2, its first repeat offset pinned
	// (0) so that the blocks stay readable whatever s2.MakeDict picks.
	// Encode and Decode only read it, so it is shared like the codecs.
	recordDictS2 = sync.OnceValue(func() *s2.Dict { return s2.MakeDictManual(zdictV1, 0) })
	valueDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderMaxMemory(maxDecoded),
			zstd.WithDecoderDictRaw(zdictV1ID, zdictV1))
	})
)

// JSONBuffers holds the buffers records are encoded into before they are
// compressed: the JSON is garbage once compressed (most records), so it
// need not be allocated per record (GC was an eighth of reconcile's CPU).
// Like the codecs above it is shared and safe for concurrent use.
var JSONBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer: a buffer grown by an unusually large record is dropped
// rather than kept.
const maxPooledBuffer = 1 << 20

// EncodeRecord is a value as stored: v's JSON, compressed when smaller.
func EncodeRecord(v any) ([]byte, error) { return encodeWith(v, CompressRecord) }

// encodeWith encodes v's JSON into a pooled buffer and hands it to
// compress, which returns a new slice.
func encodeWith(v any, compress func([]byte) ([]byte, error)) ([]byte, error) {
	buf := JSONBuffers.Get().(*bytes.Buffer)
	defer PutJSONBuffer(buf)
	// Encoder output is json.Marshal's (HTML escaped) plus a newline.
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		return nil, err
	}
	buf.Truncate(buf.Len() - 1)
	return compress(buf.Bytes())
}

func PutJSONBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBuffer {
		buf.Reset()
		JSONBuffers.Put(buf)
	}
}

// CompressRecord is a record's JSON as stored, in a new slice (bbolt keeps
// the value until commit): compressed when that is smaller.
func CompressRecord(data []byte) ([]byte, error) {
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

// castagnoli is CRC-32C's table (computed once by hash/crc32, never changed).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// s2Buffers holds the scratch an s2 record is encoded into before it is
// copied out at its exact size.
var s2Buffers = sync.Pool{New: func() any { return new([]byte) }}

// EncodeHotRecord is encodeRecord for the records a replay writes (ledger,
// entry and audit records): s2 against dictionary 1 instead of zstd.
// Entry and ledger records are written without reflection, to the same
// bytes (hotjson.go).
func EncodeHotRecord(v any) ([]byte, error) {
	bp := hotBuffers.Get().(*[]byte)
	defer putHotBuffer(bp)
	var ok bool
	switch r := v.(type) {
	case *StoredEntry:
		*bp, ok = appendStoredEntryJSON((*bp)[:0], r)
	case *idempotency.Record:
		*bp, ok = appendLedgerJSON((*bp)[:0], r)
	}
	if ok {
		return CompressHotRecord(*bp)
	}
	return encodeWith(v, CompressHotRecord)
}

// EncodeEntryHot is EncodeHotRecord(EncodeEntry(r)) without the copy of
// r EncodeEntry makes.
func EncodeEntryHot(r *EntryRecord) ([]byte, error) {
	bp := hotBuffers.Get().(*[]byte)
	defer putHotBuffer(bp)
	var ok bool
	if *bp, ok = appendEntryRecordJSON((*bp)[:0], r); ok {
		return CompressHotRecord(*bp)
	}
	return encodeWith(EncodeEntry(r), CompressHotRecord)
}

// hotBuffers holds the scratch the appenders write a record's JSON into
// before it is compressed (into a new slice).
var hotBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func putHotBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledBuffer {
		hotBuffers.Put(bp)
	}
}

// EncodeEntriesAside is EncodeEntryHot of prev and of next, run on one
// of the store's encoder goroutines, for records encoded before the write
// lock (PrepareEntry), both in one hand-off (each is a wake-up and two
// goroutine switches). s2's dictionary encoder keeps a 64 KB match table
// on the stack: run on a replay's own short-lived goroutine, each one
// grew its stack for it (issue 33: +35-50 CPU-µs per replay in copystack
// and the scavenger, more than the encoding saved inside the lock). The
// encoder goroutines live as long as the process, their stacks grown once.
func EncodeEntriesAside(prev, next *EntryRecord) (base, data []byte, err error) {
	j := asideJobs.Get().(*asideJob)
	j.prev, j.next = prev, next
	asideEncoders() <- j
	<-j.done
	base, data, err = j.data, j.data2, j.err
	j.prev, j.next, j.data, j.data2, j.err = nil, nil, nil, nil, nil
	asideJobs.Put(j)
	return base, data, err
}

// encodeEntriesSafely is EncodeEntriesAside's work, a panic (a value's
// MarshalJSON, in encoding/json's fallback) returned as an error: on the
// caller's goroutine it would have been the caller's to recover; here it
// would end the process.
func encodeEntriesSafely(prev, next *EntryRecord) (base, data []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			base, data, err = nil, nil, fmt.Errorf("encode record: panic: %v", p)
		}
	}()
	if base, err = EncodeEntryHot(prev); err != nil {
		return nil, nil, err
	}
	data, err = EncodeEntryHot(next)
	return base, data, err
}

// asideJob is work for the encoder goroutines (two entry records to
// encode); done is told once it is done.
type asideJob struct {
	prev, next *EntryRecord // EncodeEntriesAside
	data       []byte
	data2      []byte // next's, for EncodeEntriesAside
	err        error
	done       chan struct{}
}

// asideJobs recycles asideJob values with their done channels.
var asideJobs = sync.Pool{New: func() any { return &asideJob{done: make(chan struct{}, 1)} }}

// asideEncoders starts the encoder goroutines, one per CPU, on first use
// and returns the channel that feeds them. Like the codecs above it is
// built once and never changes; the goroutines only run EncodeEntryHot.
var asideEncoders = sync.OnceValue(func() chan<- *asideJob {
	jobs := make(chan *asideJob)
	for range runtime.GOMAXPROCS(0) {
		go func() {
			for j := range jobs {
				j.data, j.data2, j.err = encodeEntriesSafely(j.prev, j.next)
				j.done <- struct{}{}
			}
		}()
	}
	return jobs
})

// CompressHotRecord is CompressRecord with s2 (see EncodeHotRecord).
func CompressHotRecord(data []byte) ([]byte, error) {
	if len(data) < minCompress {
		return bytes.Clone(data), nil
	}
	if len(data) > maxS2Record {
		return CompressRecord(data)
	}
	d := recordDictS2()
	if d == nil {
		return nil, errors.New("s2: dictionary 1 refused")
	}
	bp := s2Buffers.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledBuffer {
			s2Buffers.Put(bp)
		}
	}()
	need := s2Header + s2.MaxEncodedLen(len(data))
	if cap(*bp) < need {
		*bp = make([]byte, need)
	}
	out := (*bp)[:need]
	copy(out, s2Magic)
	out[len(s2Magic)] = s2DictV1ID
	binary.LittleEndian.PutUint32(out[len(s2Magic)+1:], crc32.Checksum(data, castagnoli))
	// Encode writes into out[s2Header:] (it is large enough), so the
	// record is out's first s2Header+len(z) bytes.
	z := d.Encode(out[s2Header:], data)
	if n := s2Header + len(z); n < len(data) {
		return bytes.Clone(out[:n]), nil
	}
	return bytes.Clone(data), nil
}

// ErrRecordCodec says a stored record is damaged or in a format this
// version does not know.
var ErrRecordCodec = errors.New("record codec")

func decodeS2Record(raw []byte) ([]byte, error) {
	if len(raw) < s2Header {
		return nil, fmt.Errorf("%w: s2 record of %d bytes", ErrRecordCodec, len(raw))
	}
	if id := raw[len(s2Magic)]; id != s2DictV1ID {
		return nil, fmt.Errorf("%w: s2 record names dictionary %d, unknown to this version", ErrRecordCodec, id)
	}
	block := raw[s2Header:]
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: s2: %w", ErrRecordCodec, err)
	}
	// No s2 record larger than maxS2Record is written (larger ones take
	// zstd), and the decoder allocates what the block claims before it
	// finds a damaged block: a claim above that is damage, refused before
	// a 15-byte record costs a GiB.
	if n > maxS2Record {
		return nil, fmt.Errorf("%w: s2 record claims %d bytes, more than the %d an s2 record holds", ErrRecordCodec, n, maxS2Record)
	}
	d := recordDictS2()
	if d == nil {
		return nil, errors.New("s2: dictionary 1 refused")
	}
	data, err := d.Decode(nil, block)
	if err != nil {
		return nil, fmt.Errorf("%w: s2: %w", ErrRecordCodec, err)
	}
	if crc32.Checksum(data, castagnoli) != binary.LittleEndian.Uint32(raw[len(s2Magic)+1:]) {
		return nil, fmt.Errorf("%w: s2 record fails its checksum", ErrRecordCodec)
	}
	return data, nil
}

// RecordJSON is a stored value's JSON, whichever of the three formats it
// is in: plain JSON (files written before compression), a zstd frame, or
// an s2 record.
func RecordJSON(raw []byte) ([]byte, error) {
	if bytes.HasPrefix(raw, s2Magic) {
		return decodeS2Record(raw)
	}
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
	data, err := RecordJSON(raw)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// EncodeValue is DecodeValue's inverse.
func EncodeValue(v any) ([]byte, error) { return EncodeRecord(v) }

// Payload codec tags (the first byte of a value in bucketPayloadsZ).
const (
	payloadRaw  byte = 0
	payloadZstd byte = 1 // written before issue 16's s2 payloads; still read
	// payloadS2: the payload's CRC-32C (4 bytes, little endian: an s2
	// block carries no checksum, and a damaged payload must never be
	// sent as other bytes), then one s2 block, without a dictionary.
	payloadS2 byte = 2
	// s2PayloadHeader: the tag and the CRC-32C before an s2 payload's block.
	s2PayloadHeader = 5
)

// maxS2Payload: larger payloads take zstd (they are rare, and compress
// better there); the decoder refuses an s2 payload claiming more, so a
// damaged length cannot make it allocate a GiB.
const maxS2Payload = 1 << 20

// EncodePayload is a payload as stored: s2 (issue 16: zstd reset its
// 128 KB match table for every payload, ~26 us for a 2.5 KB payload
// against ~4 us for s2, a tenth of reconcile's CPU per entry; s2 stores
// ~0.32 of a generated payload against zstd's ~0.26), zstd above
// maxS2Payload, raw when neither is smaller.
func EncodePayload(p []byte) ([]byte, error) {
	if len(p) >= minCompress && len(p) <= maxS2Payload {
		out := make([]byte, s2PayloadHeader+s2.MaxEncodedLen(len(p)))
		out[0] = payloadS2
		binary.LittleEndian.PutUint32(out[1:], crc32.Checksum(p, castagnoli))
		if n := s2PayloadHeader + len(s2.Encode(out[s2PayloadHeader:], p)); n < len(p)+1 {
			return bytes.Clone(out[:n]), nil
		}
		return append([]byte{payloadRaw}, p...), nil
	}
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

// ErrPayloadCodec says a stored payload carries a tag this version does
// not know (written by a newer replayctl, or damaged).
var ErrPayloadCodec = errors.New("unknown payload codec")

// DecodePayload is the payload a stored value holds (EncodePayload).
func DecodePayload(v []byte) ([]byte, error) {
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: empty value", ErrPayloadCodec)
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
	case payloadS2:
		if len(v) < s2PayloadHeader {
			return nil, fmt.Errorf("%w: s2 payload of %d bytes", ErrPayloadCodec, len(v))
		}
		n, err := s2.DecodedLen(v[s2PayloadHeader:])
		if err != nil {
			return nil, fmt.Errorf("decompress payload: s2: %w", err)
		}
		if n > maxS2Payload {
			return nil, fmt.Errorf("decompress payload: s2 payload claims %d bytes, more than the %d an s2 payload holds", n, maxS2Payload)
		}
		p, err := s2.Decode(make([]byte, n), v[s2PayloadHeader:])
		if err != nil {
			return nil, fmt.Errorf("decompress payload: s2: %w", err)
		}
		if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(v[1:]) {
			return nil, errors.New("decompress payload: s2 payload fails its checksum")
		}
		return p, nil
	}
	return nil, fmt.Errorf("%w %d", ErrPayloadCodec, v[0])
}
