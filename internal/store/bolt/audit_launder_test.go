package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// keyedAppend is the next ordinary keyed write (dlq resolve with the key).
func keyedAppend(t *testing.T, path string, key []byte) (*Bolt, error) {
	t.Helper()
	s, err := Open(path, store.Options{AuditKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, s.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.Append(&audit.Record{Actor: "bob", Kind: audit.KindResolve, EntryRef: "jsonl:x", Reason: "handled"})
		return err
	})
}

// rechain re-seals records from..to after applying edit to each, and
// points the head at the last one, as an attacker without the key would.
func rechain(b, meta *bolt.Bucket, to uint64, edit func(*audit.Record)) error {
	prev := audit.Genesis
	for seq := uint64(1); seq <= to; seq++ {
		var s audit.Sealed
		if err := store.DecodeValue(b.Get(seqKey(seq)), &s); err != nil {
			return err
		}
		rec, err := s.Open()
		if err != nil {
			return err
		}
		edit(&rec)
		forged, err := audit.Seal(&rec, prev)
		if err != nil {
			return err
		}
		data, _ := json.Marshal(forged)
		if err := b.Put(seqKey(seq), data); err != nil {
			return err
		}
		prev = forged.Hash
	}
	head, _ := json.Marshal(auditHead{Seq: to, Hash: prev})
	return meta.Put(keyAuditHead, head)
}

// Issue 29: a rewritten signed chain was re-signed by the next ordinary
// keyed write, after which verify said "ok, head signature valid". The
// keyed writer now authenticates the head first and refuses.
func TestKeyedBoltWriterRefusesAForgedHead(t *testing.T) {
	key := []byte("k29")
	cases := []struct {
		name string
		edit func(b, meta *bolt.Bucket) error
	}{
		{"delete the last 4 records and move the head", func(b, meta *bolt.Bucket) error {
			for seq := uint64(7); seq <= 10; seq++ {
				if err := b.Delete(seqKey(seq)); err != nil {
					return err
				}
			}
			return rechain(b, meta, 6, func(*audit.Record) {})
		}},
		{"rewrite record 5 and re-chain", func(b, meta *bolt.Bucket) error {
			return rechain(b, meta, 10, func(r *audit.Record) {
				if r.Seq == 5 {
					r.Action = "quarantine"
				}
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := chainFile(t, 10, key)
			tamper(t, path, c.edit)
			if res := verifyFile(t, path, key); res.OK() {
				t.Fatalf("verify missed the rewrite: %+v", res)
			}
			s, err := keyedAppend(t, path, key)
			var te *store.AuditTamperError
			if !errors.Is(err, store.ErrAuditTampered) || !errors.As(err, &te) {
				t.Fatalf("keyed write on a forged head: %v, want ErrAuditTampered", err)
			}
			if got := s.AuditTamperRefusals(); got != 1 {
				t.Fatalf("one refused write counted %d times", got)
			}
			s.Close()
			res := verifyFile(t, path, key)
			if res.OK() || !strings.Contains(res.Break.Reason, "signature") {
				t.Fatalf("after the refused write verify must still say BROKEN: %+v", res)
			}
		})
	}
	// The intact chain takes the same write.
	path := chainFile(t, 3, key)
	if _, err := keyedAppend(t, path, key); err != nil {
		t.Fatal(err)
	}
}
