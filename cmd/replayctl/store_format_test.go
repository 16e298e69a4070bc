package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// loadStoreFixture writes a bbolt file from a text dump: bucket -> keys and
// values, each as text (k, v) or hex (kx, vx), exactly as a replayctl
// version wrote them.
func loadStoreFixture(t *testing.T, fixture, path string) {
	t.Helper()
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	var dump map[string][]struct{ K, KX, V, VX string }
	if err := json.Unmarshal(data, &dump); err != nil {
		t.Fatalf("%s: %v", fixture, err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bbolt.Tx) error {
		for name, kvs := range dump {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				k, v := []byte(kv.K), []byte(kv.V)
				if kv.KX != "" {
					if k, err = hex.DecodeString(kv.KX); err != nil {
						return err
					}
				}
				if kv.VX != "" {
					if v, err = hex.DecodeString(kv.VX); err != nil {
						return err
					}
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
}

// A state file written before records and payloads were compressed
// (testdata/store/format0.json: the buckets of a file that replayctl wrote
// on reconciling format0.jsonl, dumped as text) keeps working: its chain
// verifies, its decisions re-run exactly, its payloads read back byte for
// byte, and a new run appends compressed records to the same chain.
func TestStoreWrittenInTheOldFormatStillWorks(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "replayctl.db")
	loadStoreFixture(t, filepath.Join("testdata", "store", "format0.json"), db)
	cli := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		args = append(args, "--db", db)
		if code := run(args, nil, &out, &errb); code != want {
			t.Fatalf("%s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out.String(), errb.String())
		}
		return out.String()
	}
	engine := []string{"--rules", "../../rules.yaml", "--policies", "../../policies"}

	if out := cli(exitOK, "audit", "verify"); !strings.HasPrefix(out, "ok: 6 record(s)") {
		t.Fatalf("old file's chain: %s", out)
	}
	for _, id := range []string{"1", "4", "6"} { // the replayed, the approval and the quarantined entry
		if out := cli(exitOK, append([]string{"audit", "replay-decision", id}, engine...)...); !strings.Contains(out, "re-run on snapshot") || !strings.Contains(out, "-> same decision") {
			t.Fatalf("replay-decision %s on the old file: %s", id, out)
		}
	}
	payloadOf := func(ref string) []byte {
		t.Helper()
		s, err := bolt.Open(db, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var p []byte
		if err := s.View(context.Background(), func(tx store.Tx) error {
			er, err := tx.Entry(ref)
			if er != nil {
				p = er.Entry.Payload
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got, want := payloadOf("jsonl:o1"), `{"n":1,"text":"a payload long enough to be compressed by the new store format, verbatim   spacing kept"}`; string(got) != want {
		t.Fatalf("old payload %q, want %q", got, want)
	}

	// A new run on the old file: its records are compressed, chained onto
	// the old ones.
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer target.Close()
	newPayload := `{"n":4,  "text":"another payload long enough to be compressed, with   its spacing kept as sent"}`
	dlq := filepath.Join(dir, "more.jsonl")
	if err := os.WriteFile(dlq, []byte(`{"id":"o4","topic":"tool.email.send","reason_code":"timeout","idempotency_key":"o4","payload":`+newPayload+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(exitOK, append([]string{"reconcile", "--source", "jsonl:" + dlq, "--target", target.URL, "--approvers", filepath.Join(dir, "none.yaml")}, engine...)...)
	if out := cli(exitOK, "audit", "verify"); !strings.HasPrefix(out, "ok: 9 record(s)") {
		t.Fatalf("old chain with new records: %s", out)
	}
	if out := cli(exitOK, append([]string{"audit", "replay-decision", "7"}, engine...)...); !strings.Contains(out, "-> same decision") {
		t.Fatalf("replay-decision 7: %s", out)
	}
	if got := payloadOf("jsonl:o4"); string(got) != newPayload {
		t.Fatalf("new payload %q, want %q", got, newPayload)
	}
	raw, err := bbolt.Open(db, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.View(func(tx *bbolt.Tx) error {
		seq := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
		if v := tx.Bucket([]byte("audit")).Get(seq(1)); !bytes.HasPrefix(v, []byte(`{"seq":1,`)) {
			t.Errorf("old record 1 was rewritten: %q", v)
		}
		// Compressed as the store writes audit records now: an s2 record
		// (magic ff 73 32) since issue 16's last round, a zstd frame before.
		if v := tx.Bucket([]byte("audit")).Get(seq(7)); !bytes.HasPrefix(v, []byte{0xff, 0x73, 0x32}) && !bytes.HasPrefix(v, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
			t.Errorf("new record 7 is not stored compressed: %q", v)
		}
		if tx.Bucket([]byte("payloads_z")).Get([]byte("jsonl:o4")) == nil || tx.Bucket([]byte("payloads")).Get([]byte("jsonl:o1")) == nil {
			t.Error("payloads: want the new one in payloads_z and the old one left where it was")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The rules and policy text a decision ran with are stored once, under the
// hash the audit records carry. Editing that text in the file (here a
// file of the old format, its snapshot plain JSON) makes `audit verify`
// fail at the first record that refers to it, naming the snapshot, and
// `audit replay-decision` refuse to re-run on it.
func TestAuditVerifyNamesTheRecordOfAChangedSnapshot(t *testing.T) {
	db := filepath.Join(t.TempDir(), "replayctl.db")
	loadStoreFixture(t, filepath.Join("testdata", "store", "format0.json"), db)
	raw, err := bbolt.Open(db, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if err := raw.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("snapshots"))
		k, v := b.Cursor().First()
		id = string(k)
		edited := bytes.Replace(v, []byte("quarantine"), []byte("auto_replay"), 1)
		if bytes.Equal(edited, v) {
			t.Fatal("the fixture's snapshot does not mention quarantine")
		}
		return b.Put(k, edited)
	}); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	var out, errb bytes.Buffer
	if code := run([]string{"audit", "verify", "--db", db}, nil, &out, &errb); code != exitError {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitError, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "audit chain broken at record 1: policy snapshot "+id+" it refers to was changed") {
		t.Fatalf("verify output: %s", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"audit", "replay-decision", "1", "--db", db, "--rules", "../../rules.yaml", "--policies", "../../policies"}, nil, &out, &errb); code == exitOK {
		t.Fatalf("replay-decision ran on a changed snapshot: %s", out.String())
	}
}
