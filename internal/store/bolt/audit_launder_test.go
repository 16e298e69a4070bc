package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// keyedAppend is the next ordinary keyed write (dlq resolve with the key).
func keyedAppend(t *testing.T, path string, key []byte) (*Bolt, error) {
	t.Helper()
	s, err := OpenBolt(path, Options{AuditKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, s.Update(context.Background(), func(tx Tx) error {
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
		if err := DecodeValue(b.Get(seqKey(seq)), &s); err != nil {
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
			var te *AuditTamperError
			if !errors.Is(err, ErrAuditTampered) || !errors.As(err, &te) {
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

// On PostgreSQL the sealer signs what it chains: a forged row after the
// head, or a head moved back over records then edited, was sealed and
// signed by the next keyed process. Writers now sign each row and the
// sealer checks the head and every row before chaining.
func TestKeyedPostgresSealerRefusesForgedRecords(t *testing.T) {
	key := []byte("k29")
	cases := []struct {
		name    string
		sql     string
		wantSeq func(head uint64) uint64
	}{
		{"insert a forged approval after the head",
			`INSERT INTO audit (seq, body) SELECT nextval('audit_seq'), convert_to('{"seq":' || currval('audit_seq') || ',"actor":"mallory","kind":"approval","outcome":"approved"}', 'UTF8')`,
			func(head uint64) uint64 { return head + 1 }},
		{"move the head back 3 and edit those records",
			`UPDATE audit_head SET seq = seq - 3, hash = (SELECT hash FROM audit WHERE seq = (SELECT seq - 3 FROM audit_head WHERE id = 1)) WHERE id = 1;
			 UPDATE audit SET body = convert_to(replace(convert_from(body, 'UTF8'), 'auto_replay', 'quarantine'), 'UTF8') WHERE seq > (SELECT seq FROM audit_head WHERE id = 1)`,
			func(head uint64) uint64 { return head - 2 }}, // the first record edited
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := testsvc.Postgres(t)
			p := openPG(t, dsn, Options{AuditKey: key})
			for i := range 6 {
				if _, err := appendRef(ctx, p, fmt.Sprintf("jsonl:e%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := p.SealAudit(ctx, true); err != nil {
				t.Fatal(err)
			}
			head, _, _, err := p.AuditSignedHead(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.pool.Exec(ctx, c.sql); err != nil {
				t.Fatal(err)
			}
			// The next keyed process seals.
			next := openPG(t, dsn, Options{AuditKey: key})
			if _, err := next.SealAudit(ctx, true); !errors.Is(err, ErrAuditTampered) {
				t.Fatalf("keyed sealer on forged records: %v, want ErrAuditTampered", err)
			}
			if next.AuditTamperRefusals() == 0 {
				t.Fatal("refusal not counted")
			}
			res, err := audit.Verify(ctx, next, key)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK() || res.Break.Seq != c.wantSeq(head) {
				t.Fatalf("verify must report the forgery at %d: %+v", c.wantSeq(head), res)
			}
		})
	}
}

// The runner's check (replay.chainAgrees) reads the chain's word on a key
// inside its transaction, on both stores.
func TestChainSucceededReadsTheOutcomeRecord(t *testing.T) {
	outcome := func(ref, key, after string) *audit.Record {
		return &audit.Record{Actor: "ops-bot", Kind: audit.KindOutcome, EntryRef: ref, Key: key, LedgerBefore: "dispatching", LedgerAfter: after, Outcome: after}
	}
	check := func(t *testing.T, s Backend) {
		ctx := context.Background()
		if err := s.Update(ctx, func(tx Tx) error {
			for _, r := range []*audit.Record{outcome("jsonl:a", "ka", "failed"), outcome("jsonl:a", "ka", "succeeded"), outcome("jsonl:b", "kb", "failed")} {
				if _, err := tx.Append(r); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, func(tx Tx) error {
			cr := tx.(interface {
				ChainSucceeded(ref, key string) (uint64, error)
			})
			for _, c := range []struct {
				ref, key string
				want     uint64
			}{{"jsonl:a", "ka", 2}, {"jsonl:b", "kb", 0}, {"jsonl:a", "other", 0}} {
				got, err := cr.ChainSucceeded(c.ref, c.key)
				if err != nil || got != c.want {
					t.Errorf("ChainSucceeded(%s, %s) = %d %v, want %d", c.ref, c.key, got, err, c.want)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("bbolt", func(t *testing.T) {
		s, err := OpenBolt(filepath.Join(t.TempDir(), "replayctl.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		check(t, s)
	})
	t.Run("postgres", func(t *testing.T) { check(t, openPG(t, testsvc.Postgres(t), Options{})) })
}
