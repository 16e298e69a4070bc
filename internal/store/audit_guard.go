package store

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/replayctl/replayctl/internal/audit"
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

// TamperCount counts the refusals of one open store.
type TamperCount struct{ N atomic.Uint64 }

// refuse counts a refusal (c nil: the caller counts, see count) and
// returns its error.
func (c *TamperCount) Refuse(seq uint64, reason string) error {
	if c != nil {
		c.N.Add(1)
	}
	return &AuditTamperError{Seq: seq, Reason: reason}
}

// count counts err once when it is a refusal: a bbolt write that fails in
// a group commit runs again alone, so Append may refuse twice for one
// Update.
func (c *TamperCount) Count(err error) error {
	if errors.Is(err, ErrAuditTampered) {
		c.N.Add(1)
	}
	return err
}

// CheckHeadMAC authenticates a stored head before a keyed writer extends
// it. An empty MAC is a chain never signed: a key given to an existing
// unsigned store signs it from there on (docs/threat-model.md says what
// only a checkpoint catches then).
func CheckHeadMAC(key []byte, seq uint64, hash, mac string) bool {
	if len(key) == 0 || mac == "" {
		return true
	}
	return hmac.Equal([]byte(mac), []byte(audit.HeadMAC(key, seq, hash)))
}

// RowMAC authenticates one record a PostgreSQL writer appends unchained:
// the sealer chains only records signed by a holder of the key.
func RowMAC(key []byte, seq uint64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("audit-row\n" + strconv.FormatUint(seq, 10) + "\n"))
	m.Write(body)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}
