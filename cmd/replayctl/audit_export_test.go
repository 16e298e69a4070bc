package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// Issue 29: `audit export` exited 0 on a chain `audit verify` reported
// broken, so a SIEM took in a forged trail. Export now verifies as it goes:
// the records before the break, then an error line, and a non-zero exit.
func TestAuditExportStopsAtTheFirstBrokenLink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replayctl.db")
	st, err := bolt.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"a", "b", "c", "d", "e", "f"} {
		if err := st.Update(context.Background(), func(tx store.Tx) error {
			_, err := tx.Append(&audit.Record{Actor: "alice", Kind: audit.KindResolve, EntryRef: "jsonl:" + ref, Reason: "ok"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	export := func() (int, []string, string) {
		var out, errb bytes.Buffer
		code := run([]string{"audit", "export", "--db", path}, strings.NewReader(""), &out, &errb)
		return code, strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), errb.String()
	}
	if code, lines, stderr := export(); code != 0 || len(lines) != 6 {
		t.Fatalf("intact chain: exit %d, %d lines, %s", code, len(lines), stderr)
	}
	// Record 4 edited in the file.
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], 4)
		b := tx.Bucket([]byte("audit"))
		var s audit.Sealed
		if err := store.DecodeValue(b.Get(k[:]), &s); err != nil {
			return err
		}
		s.Body = bytes.Replace(s.Body, []byte(`"alice"`), []byte(`"mallory"`), 1)
		data, _ := json.Marshal(s)
		return b.Put(k[:], data)
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, lines, stderr := export()
	if code == 0 {
		t.Fatalf("export of a broken chain exited 0:\n%s", strings.Join(lines, "\n"))
	}
	if len(lines) != 4 || !strings.HasPrefix(lines[3], `{"error":{"seq":4,`) {
		t.Fatalf("want records 1-3 then the error line at 4, got:\n%s", strings.Join(lines, "\n"))
	}
	if !strings.Contains(stderr, "broken at record 4") {
		t.Fatalf("stderr does not name the break: %s", stderr)
	}
}
