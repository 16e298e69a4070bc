package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
)

// chainFile writes n audit records into a fresh db file and closes it.
func chainFile(t *testing.T, n int, key []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replayctl.db")
	s, err := Open(path, store.Options{AuditKey: key})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := s.Update(context.Background(), func(tx store.Tx) error {
			_, err := tx.Append(&audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: "jsonl:e" + string(rune('a'+i)), Action: "auto_replay"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// tamper edits the db file directly, as someone with write access would.
func tamper(t *testing.T, path string, fn func(b, meta *bolt.Bucket) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(bucketAudit), tx.Bucket(bucketMeta)) }); err != nil {
		t.Fatal(err)
	}
}

func verifyFile(t *testing.T, path string, key []byte) *audit.VerifyResult {
	t.Helper()
	s, err := Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := audit.Verify(context.Background(), s, key)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestAuditVerifyFindsTampering(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(t *testing.T, b, meta *bolt.Bucket) error
		wantSeq uint64
	}{
		{"change", func(t *testing.T, b, _ *bolt.Bucket) error {
			// Records are stored compressed: the editor decompresses,
			// edits and writes the JSON back (plain JSON still reads).
			data, err := store.RecordJSON(b.Get(seqKey(3)))
			if err != nil {
				return err
			}
			v := strings.Replace(string(data), `auto_replay`, `quarantine`, 1)
			return b.Put(seqKey(3), []byte(v))
		}, 3},
		{"flip a byte of the compressed record", func(t *testing.T, b, _ *bolt.Bucket) error {
			v := bytes.Clone(b.Get(seqKey(3)))
			if !bytes.HasPrefix(v, s2Magic) {
				t.Fatalf("record 3 is not stored compressed: %q", v)
			}
			v[len(v)/2] ^= 0x01
			return b.Put(seqKey(3), v)
		}, 3},
		{"delete", func(t *testing.T, b, _ *bolt.Bucket) error { return b.Delete(seqKey(2)) }, 3},
		{"reorder", func(t *testing.T, b, _ *bolt.Bucket) error {
			two, three := append([]byte(nil), b.Get(seqKey(2))...), append([]byte(nil), b.Get(seqKey(3))...)
			if err := b.Put(seqKey(2), three); err != nil {
				return err
			}
			return b.Put(seqKey(3), two)
		}, 2},
		{"truncate tail", func(t *testing.T, b, _ *bolt.Bucket) error { return b.Delete(seqKey(5)) }, 5},
		{"garbage", func(t *testing.T, b, _ *bolt.Bucket) error { return b.Put(seqKey(4), []byte("{not json")) }, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := chainFile(t, 5, nil)
			if res := verifyFile(t, path, nil); !res.OK() || res.Records != 5 {
				t.Fatalf("intact chain: %+v", res)
			}
			tamper(t, path, func(b, meta *bolt.Bucket) error { return c.edit(t, b, meta) })
			res := verifyFile(t, path, nil)
			if res.OK() {
				t.Fatal("tampering not detected")
			}
			if res.Break.Seq != c.wantSeq {
				t.Fatalf("break at %d (%s), want %d", res.Break.Seq, res.Break.Reason, c.wantSeq)
			}
			// Issue 29: export stops at the same break, with an error
			// line, and fails (it exited 0 on every one of these).
			exportBreaks(t, path, c.wantSeq)
		})
	}
}

func TestSignedHeadCatchesAConsistentRewrite(t *testing.T) {
	key := []byte("s3cret")
	path := chainFile(t, 4, key)
	if res := verifyFile(t, path, key); !res.OK() || !res.Signed {
		t.Fatalf("signed chain: %+v", res)
	}
	// Rewrite record 2 and re-seal every record after it, head included:
	// without the key the chain alone cannot tell.
	tamper(t, path, func(b, meta *bolt.Bucket) error {
		prev := audit.Genesis
		for seq := uint64(1); seq <= 4; seq++ {
			var s audit.Sealed
			if err := store.DecodeValue(b.Get(seqKey(seq)), &s); err != nil {
				return err
			}
			rec, err := s.Open()
			if err != nil {
				return err
			}
			if seq == 2 {
				rec.Actor = "mallory"
			}
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
		head, _ := json.Marshal(auditHead{Seq: 4, Hash: prev})
		return meta.Put(keyAuditHead, head)
	})
	if res := verifyFile(t, path, nil); !res.OK() {
		t.Fatalf("without a key the rewrite is consistent, got %+v", res.Break)
	}
	res := verifyFile(t, path, key)
	if res.OK() || !strings.Contains(res.Break.Reason, "signature") {
		t.Fatalf("signed head did not catch the rewrite: %+v", res)
	}
}

// exportBreaks exports the file and requires the export to fail at the
// break verify reports, its last line the error trailer.
func exportBreaks(t *testing.T, path string, wantSeq uint64) {
	t.Helper()
	s, err := Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out bytes.Buffer
	err = audit.Export(context.Background(), s, &out, nil)
	var brk *audit.Break
	if !errors.As(err, &brk) || brk.Seq != wantSeq {
		t.Fatalf("export of a broken chain: %v, want a break at %d", err, wantSeq)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, fmt.Sprintf(`{"error":{"seq":%d,`, wantSeq)) {
		t.Fatalf("export's last line %q, want the error trailer", last)
	}
}
