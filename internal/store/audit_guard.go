package store

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/idempotency"
)

// A keyed writer extends a signed chain only from a head it can
// authenticate. Without this check the next ordinary keyed write re-signed
// whatever head it found: a chain cut short or rewritten by someone who
// could write the store but lacked the key came out "ok, head signature
// valid" (issue 29). The writer refuses instead, with ErrAuditTampered (an
// alert: the store was edited behind replayctl's back) and a count the
// server exports as replayctl_audit_tamper_refusals_total.

// ErrAuditTampered: a keyed writer or sealer found the stored chain head
// (or, on PostgreSQL, an unsealed record) not signed with its key. Nothing
// is appended until a person restores the store (audit verify names the
// record; a checkpoint kept elsewhere tells which head is genuine).
var ErrAuditTampered = errors.New("audit chain tampered with")

// AuditTamperError says where a keyed writer found the chain forged.
type AuditTamperError struct {
	Seq    uint64
	Reason string
}

func (e *AuditTamperError) Error() string {
	return fmt.Sprintf("%v at record %d: %s; refusing to extend it (run audit verify --audit-key-file, restore the store from a backup that verifies against your last checkpoint)", ErrAuditTampered, e.Seq, e.Reason)
}

func (e *AuditTamperError) Unwrap() error { return ErrAuditTampered }

// tamperCount counts the refusals of one open store.
type tamperCount struct{ n atomic.Uint64 }

// refuse counts a refusal (c nil: the caller counts, see count) and
// returns its error.
func (c *tamperCount) refuse(seq uint64, reason string) error {
	if c != nil {
		c.n.Add(1)
	}
	return &AuditTamperError{Seq: seq, Reason: reason}
}

// count counts err once when it is a refusal: a bbolt write that fails in
// a group commit runs again alone, so Append may refuse twice for one
// Update.
func (c *tamperCount) count(err error) error {
	if errors.Is(err, ErrAuditTampered) {
		c.n.Add(1)
	}
	return err
}

// AuditTamperRefusals is how many appends this store refused because the
// chain head was not signed with its key.
func (s *Bolt) AuditTamperRefusals() uint64 { return s.tamper.n.Load() }

// AuditTamperRefusals is how many seals this process refused because the
// head or an unsealed record was not signed with its key.
func (p *Postgres) AuditTamperRefusals() uint64 { return p.tamper.n.Load() }

// checkHeadMAC authenticates a stored head before a keyed writer extends
// it. An empty MAC is a chain never signed: a key given to an existing
// unsigned store signs it from there on (docs/threat-model.md says what
// only a checkpoint catches then).
func checkHeadMAC(key []byte, seq uint64, hash, mac string) bool {
	if len(key) == 0 || mac == "" {
		return true
	}
	return hmac.Equal([]byte(mac), []byte(audit.HeadMAC(key, seq, hash)))
}

// rowMAC authenticates one record a PostgreSQL writer appends unchained:
// the sealer chains only records signed by a holder of the key.
func rowMAC(key []byte, seq uint64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("audit-row\n" + strconv.FormatUint(seq, 10) + "\n"))
	m.Write(body)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// LedgerStates implements audit.LedgerReader.
func (s *Bolt) LedgerStates(ctx context.Context, fn func(key, state string) error) error {
	return s.LedgerRecords(ctx, func(r *idempotency.Record) error { return fn(r.Key, string(r.State)) })
}

// LedgerStates implements audit.LedgerReader.
func (p *Postgres) LedgerStates(ctx context.Context, fn func(key, state string) error) error {
	return p.LedgerRecords(ctx, func(r *idempotency.Record) error { return fn(r.Key, string(r.State)) })
}

// ChainSucceeded returns the first audit record about the entry ref that
// says key's replay succeeded (0: none), read from the entry's audit index
// in this transaction. The runner asks before dispatching a key the ledger
// says was sent before but not succeeded: an edited ledger must not make
// it send again what the chain records as done.
func (t *boltTx) ChainSucceeded(ref, key string) (uint64, error) {
	idx, ab := t.bucket(bucketIdx), t.bucket(bucketAudit)
	if idx == nil || ab == nil || key == "" {
		return 0, nil
	}
	for _, prefix := range [][]byte{auditIndexKey(&audit.Record{EntryRef: ref}), auditIndexKey(&audit.Record{Key: key})} {
		c := idx.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if len(k) != len(prefix)+8 {
				continue
			}
			seq := binary.BigEndian.Uint64(k[len(prefix):])
			v := ab.Get(seqKey(seq))
			if v == nil {
				continue
			}
			var s audit.Sealed
			if err := DecodeValue(v, &s); err != nil {
				return 0, fmt.Errorf("audit record %d: %w", seq, err)
			}
			rec, err := s.Open()
			if err != nil {
				return 0, err
			}
			if rec.Key == key && rec.LedgerAfter == audit.StateSucceeded {
				return seq, nil
			}
		}
	}
	return 0, nil
}
