package bolt

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/store"
)

// putRecord encodes v (zstd) under key. Ledger and entry records are
// encoded by encodeHotRecord where they are written (their bytes go to the
// write memo too), audit records by encodeSealed.
func putRecord(b *bolt.Bucket, key []byte, v any) error {
	if b == nil {
		return store.ErrReadOnly
	}
	data, err := store.EncodeRecord(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

// bucketPayloadsZ holds payloads with a codec tag; bucketPayloads (older
// files) holds them raw and is still read.
var bucketPayloadsZ = []byte("payloads_z")

// readPayload returns a copy of the payload stored under key, from either
// bucket (nil when there is none).
func readPayload(tx *bolt.Tx, key []byte) ([]byte, error) {
	if b := tx.Bucket(bucketPayloadsZ); b != nil {
		if v := b.Get(key); v != nil {
			p, err := store.DecodePayload(v)
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
func writePayload(tx *bolt.Tx, key, p []byte) error { return writeEncodedPayload(tx, key, p, nil) }

// writeEncodedPayload is writePayload with p's stored form, enc, encoded
// before the transaction (nil: encode it here).
func writeEncodedPayload(tx *bolt.Tx, key, p, enc []byte) error {
	zb := tx.Bucket(bucketPayloadsZ)
	if zb == nil {
		return store.ErrReadOnly
	}
	if cur, err := readPayload(tx, key); err == nil && cur != nil && bytes.Equal(cur, p) {
		return nil
	}
	v := enc
	if v == nil {
		var err error
		if v, err = store.EncodePayload(p); err != nil {
			return err
		}
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
