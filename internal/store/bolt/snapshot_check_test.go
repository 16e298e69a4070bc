package bolt

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// snapshotChain writes a snapshot and four records, the second the first
// to refer to it, and returns the file and the snapshot id.
func snapshotChain(t *testing.T, keep bool) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replayctl.db")
	s, err := Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap := triage.NewSnapshot(triage.SourceFile{Name: "rules.yaml", Text: "rules: []\n"},
		[]triage.SourceFile{{Name: "replay.rego", Text: strings.Repeat("package replayctl\n\ndefault action := \"auto_replay\"\n", 4)}})
	ctx := context.Background()
	if keep {
		if err := s.PutSnapshot(ctx, snap.ID, snap); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		r := &audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: "jsonl:e" + string(rune('a'+i))}
		if i > 0 {
			r.PolicySnapshot = snap.ID
		}
		if err := s.Update(ctx, func(tx store.Tx) error { _, err := tx.Append(r); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path, snap.ID
}

func editSnapshot(t *testing.T, path, id string, fn func(v []byte) []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSnapshots)
		return b.Put([]byte(id), fn(bytes.Clone(b.Get([]byte(id)))))
	}); err != nil {
		t.Fatal(err)
	}
}

// The chain covers a snapshot's id; the text is stored once. Changing the
// stored text (a byte of the compressed value, or the policy in plain
// JSON) breaks verification at the first record that refers to it.
func TestAuditVerifyFindsAChangedSnapshot(t *testing.T) {
	cases := map[string]func(v []byte) []byte{
		"flip a byte of the compressed snapshot": func(v []byte) []byte {
			if !bytes.HasPrefix(v, zstdMagic) {
				t.Fatalf("snapshot not stored compressed: %q", v)
			}
			v[len(v)/2] ^= 0x01
			return v
		},
		"change the policy text": func(v []byte) []byte {
			data, err := store.RecordJSON(v)
			if err != nil {
				t.Fatal(err)
			}
			return bytes.Replace(data, []byte(`auto_replay`), []byte(`quarantine!`), 1)
		},
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			path, id := snapshotChain(t, true)
			if res := verifyFile(t, path, nil); !res.OK() || res.Records != 4 {
				t.Fatalf("intact: %+v", res)
			}
			editSnapshot(t, path, id, edit)
			res := verifyFile(t, path, nil)
			if res.OK() || res.Break == nil {
				t.Fatal("a changed snapshot was not detected")
			}
			if res.Break.Seq != 2 || !strings.Contains(res.Break.Reason, "policy snapshot "+id) || !strings.Contains(res.Break.Reason, "changed") {
				t.Fatalf("break at %d: %s; want record 2 naming the snapshot", res.Break.Seq, res.Break.Reason)
			}
		})
	}
}

// A file whose runs never kept their snapshot (older versions, a plain
// store) still verifies: there is nothing stored to have changed.
func TestAuditVerifyWithoutStoredSnapshots(t *testing.T) {
	path, _ := snapshotChain(t, false)
	if res := verifyFile(t, path, nil); !res.OK() || res.Records != 4 {
		t.Fatalf("%+v", res)
	}
}

func deleteSnapshot(t *testing.T, path, id string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketSnapshots).Delete([]byte(id)) }); err != nil {
		t.Fatal(err)
	}
}

// Review finding 3: a snapshot deleted from the store passed `audit
// verify`. Records written since this version keeps every snapshot (the
// marker PutSnapshot writes) that name a deleted one now fail it, counted,
// at the first of them.
func TestAuditVerifyFindsADeletedSnapshot(t *testing.T) {
	path, id := snapshotChain(t, true)
	deleteSnapshot(t, path, id)
	res := verifyFile(t, path, nil)
	if res.OK() || res.Break == nil {
		t.Fatal("a deleted snapshot was not detected")
	}
	if res.Break.Seq != 2 || !strings.Contains(res.Break.Reason, "policy snapshot "+id) || !strings.Contains(res.Break.Reason, "deleted") ||
		!strings.Contains(res.Break.Reason, "3 record(s)") || res.MissingSnapshots != 3 {
		t.Fatalf("break at %d: %s (%d missing); want record 2 naming the snapshot, 3 records", res.Break.Seq, res.Break.Reason, res.MissingSnapshots)
	}
}

// A file written before snapshots were kept, then used by this version:
// its old records' snapshots were never stored and it still verifies; a
// snapshot this version stored and someone deleted is found, and only the
// records written since count.
func TestAuditVerifyOlderFileThenADeletedSnapshot(t *testing.T) {
	path, oldID := snapshotChain(t, false) // records 2-4 name a snapshot never stored
	s, err := Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	snap := triage.NewSnapshot(triage.SourceFile{Name: "rules.yaml", Text: "rules: [] # new\n"}, nil)
	if err := s.PutSnapshot(ctx, snap.ID, snap); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{snap.ID, snap.ID} {
		r := &audit.Record{Actor: "alice", Kind: audit.KindDecision, EntryRef: "jsonl:new", PolicySnapshot: id}
		if err := s.Update(ctx, func(tx store.Tx) error { _, err := tx.Append(r); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if res := verifyFile(t, path, nil); !res.OK() || res.Records != 6 {
		t.Fatalf("an older file with new records: %+v (old snapshot %s)", res, oldID)
	}
	deleteSnapshot(t, path, snap.ID)
	res := verifyFile(t, path, nil)
	if res.OK() || res.Break == nil || res.Break.Seq != 5 || res.MissingSnapshots != 2 || !strings.Contains(res.Break.Reason, snap.ID) {
		t.Fatalf("after deleting the new snapshot: %+v", res)
	}
}
