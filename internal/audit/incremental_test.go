package audit_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// rewrite changes record seq's actor in the file, keeping its stored hash
// (what someone editing the database would do).
func rewrite(t *testing.T, path string, seq uint64) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("audit"))
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], seq)
		var s audit.Sealed
		if err := store.DecodeValue(b.Get(k[:]), &s); err != nil {
			return err
		}
		rec, err := s.Open()
		if err != nil {
			return err
		}
		rec.Actor = "mallory"
		s.Body, _ = json.Marshal(rec)
		v, _ := json.Marshal(s)
		return b.Put(k[:], v)
	}); err != nil {
		t.Fatal(err)
	}
}

func incremental(t *testing.T, iv *audit.Incremental, path string) *audit.VerifyResult {
	t.Helper()
	s, err := bolt.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := iv.Verify(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestIncrementalVerifyWalksOnlyNewRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replayctl.db")
	chain(t, path, nil, "a", 5)
	var iv audit.Incremental
	if res := incremental(t, &iv, path); !res.OK() || res.From != 1 || res.Records != 5 {
		t.Fatalf("first verification: %+v", res)
	}
	chain(t, path, nil, "a", 3)
	if res := incremental(t, &iv, path); !res.OK() || res.From != 6 || res.Records != 8 {
		t.Fatalf("second verification walked from %d, %d records: %+v", res.From, res.Records, res)
	}
	// A record changed after the verified head is found.
	chain(t, path, nil, "a", 2)
	rewrite(t, path, 10)
	if res := incremental(t, &iv, path); res.OK() || res.Break.Seq != 10 {
		t.Fatalf("tampered new record not found: %+v", res)
	}
}

// The verified head's own record changed: the walk starts over and finds
// it; a change below the head is seen by the full walk.
func TestIncrementalVerifyStartsOverWhenItsHeadChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replayctl.db")
	chain(t, path, nil, "a", 6)
	var iv audit.Incremental
	if res := incremental(t, &iv, path); !res.OK() {
		t.Fatal(res.Break)
	}
	rewrite(t, path, 6)
	if res := incremental(t, &iv, path); res.OK() || res.From != 1 || res.Break.Seq != 6 {
		t.Fatalf("changed head record: %+v", res)
	}
	path2 := filepath.Join(t.TempDir(), "replayctl.db")
	chain(t, path2, nil, "a", 6)
	var iv2 audit.Incremental
	incremental(t, &iv2, path2)
	rewrite(t, path2, 3)
	if res, err := verify(t, path2, audit.VerifyOptions{}); err != nil || res.OK() || res.Break.Seq != 3 {
		t.Fatalf("full walk after a change below the head: %+v %v", res, err)
	}
}
