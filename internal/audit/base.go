package audit

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// BaseReader is a store whose chain was pruned (`store prune`): the
// records up to its base were moved to an archive, and the live chain
// goes on from the base's hash. AuditBase returns nil when nothing was
// pruned.
type BaseReader interface {
	AuditBase(ctx context.Context) (*Checkpoint, error)
}

// BaseMAC signs a pruned chain's base with key. It is kept apart from
// HeadMAC (a domain of its own) so that a head's signature, which the
// store holds, can never be passed off as a base: a base says every record
// before it may be gone, which only the key holder may say.
func BaseMAC(key []byte, seq uint64, hash string) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "replayctl audit base\n%d\n%s", seq, hash)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// UncheckedBase is what a verification of a pruned chain without the key
// cannot see.
const UncheckedBase = "pruned base: no audit key configured, so a base moved forward by someone able to write the store (hiding the records before it) is not detected; verify with the key, or end to end with --archive"

// startAt returns the verifier to walk r with and the first record to
// walk: the genesis and record 1, or, for a pruned chain, its base. With
// a key the base's signature must hold; without one the result says the
// base was taken on trust.
func startAt(ctx context.Context, r Chain, key []byte, res *VerifyResult) (*Verifier, uint64, *Checkpoint, error) {
	base, err := r.AuditBase(ctx)
	if err != nil || base == nil {
		return NewVerifier(), 1, nil, err
	}
	if len(key) > 0 {
		if !hmac.Equal([]byte(base.MAC), []byte(BaseMAC(key, base.Seq, base.Head))) {
			res.Break = &Break{Seq: base.Seq, Reason: "the pruned chain's base is not signed with this key: records before it were removed without the key (or the key is wrong)"}
		}
	} else {
		res.Unchecked = append(res.Unchecked, UncheckedBase)
	}
	return VerifierAt(base.Seq, base.Head), base.Seq + 1, base, nil
}

// VerifierAt starts after record seq, whose hash is head: the end of an
// archive segment, or a pruned chain's base.
func VerifierAt(seq uint64, head string) *Verifier {
	if seq == 0 {
		return NewVerifier()
	}
	return &Verifier{prev: head, nextSeq: seq + 1, n: int(seq)}
}
