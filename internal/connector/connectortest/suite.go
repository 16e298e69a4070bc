package connectortest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

// Option adapts a check to a system that legitimately differs from the
// others in what the check is about; the promise the check keeps is the
// same (no record dropped, no guess at a commit).
type Option func(*options)

type options struct {
	cannotProbe   bool
	keepsAnyBytes bool
}

func optionsOf(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// CannotProbe: the system cannot be searched for an entry without
// consuming it (a broker's queue or topic). ProbeAgreesWithEntries then
// checks that its probe says so, for every entry it reads and for one it
// does not hold: ProbeInconclusive with a reason, never committed or not
// committed, which would let the runner settle an outcome_unknown by
// itself.
func CannotProbe() Option { return func(o *options) { o.cannotProbe = true } }

// KeepsAnyBytes: the system's records are opaque bytes (a broker
// message's body), which the connector keeps whole in its payload as text
// or base64, so no record of it is undecodable. UndecodableStillYielded
// then checks that the records another connector could not decode (not
// JSON, not UTF-8, empty) are each yielded as a decoded entry with a
// payload, none dropped: wantDecoded counts every record src holds.
func KeepsAnyBytes() Option { return func(o *options) { o.keepsAnyBytes = true } }

// UndecodableStillYielded: src holds at least one record that does not
// decode; it is yielded as an entry (DecodeError set, a derived key,
// named by where it was or by its own id), never dropped, and the read
// goes on to the records after it. With KeepsAnyBytes, src holds such
// records and every one is yielded decoded.
func UndecodableStillYielded(t *testing.T, src connector.Source, wantDecoded int, opts ...Option) {
	t.Helper()
	es := ReadAll(t, src)
	if optionsOf(opts).keepsAnyBytes {
		for _, e := range es {
			if e.Undecodable() || len(e.Payload) == 0 {
				t.Errorf("%s: a record kept as bytes came out undecodable or without a payload: %+v", src, e)
			}
		}
		if len(es) != wantDecoded {
			t.Errorf("%s: %d entries, want %d: a record that is not JSON or not text was dropped", src, len(es), wantDecoded)
		}
		return
	}
	bad, good := 0, 0
	for _, e := range es {
		if e.Undecodable() {
			bad++
			if e.DecodeError == "" || !e.KeyDerived {
				t.Errorf("undecodable entry without its error or a derived key: %+v", e)
			}
			continue
		}
		good++
	}
	if bad == 0 {
		t.Errorf("%s: no undecodable entry among %d", src, len(es))
	}
	if good != wantDecoded {
		t.Errorf("%s: %d decoded entries, want %d: a bad record cost the ones after it", src, good, wantDecoded)
	}
}

// SettleIdempotent: settling an entry (replayed, then again, then
// resolved with a reason) never fails because the system no longer holds
// it (a 404 or 409 after a success is fine). gone, when set, reports
// whether the system still holds the entry after the first settle.
func SettleIdempotent(t *testing.T, s connector.Settler, e *entry.Entry, held func() bool) {
	t.Helper()
	ctx := context.Background()
	if err := s.Settle(ctx, e, connector.Settlement{Replayed: true}); err != nil {
		t.Fatalf("settle %s: %v", e.Ref(), err)
	}
	if held != nil && held() {
		t.Errorf("%s still held by the system after settle", e.Ref())
	}
	if err := s.Settle(ctx, e, connector.Settlement{Replayed: true}); err != nil {
		t.Errorf("settle %s again: %v", e.Ref(), err)
	}
	if err := s.Settle(ctx, e, connector.Settlement{Reason: "fixed upstream"}); err != nil {
		t.Errorf("resolve %s after settle: %v", e.Ref(), err)
	}
}

// ProbeAgreesWithEntries: every entry src yields is, by p, still in the
// DLQ (not committed), and an id src does not hold is not. With
// CannotProbe, p answers ProbeInconclusive for both, with a reason.
func ProbeAgreesWithEntries(t *testing.T, src connector.Source, p connector.EntryProber, opts ...Option) {
	t.Helper()
	ctx := context.Background()
	es := ReadAll(t, src)
	if len(es) == 0 {
		t.Fatalf("%s yields nothing to probe", src)
	}
	if optionsOf(opts).cannotProbe {
		gone := es[0]
		gone.ID = "not-in-the-dlq-" + gone.ID
		for _, e := range append(es, gone) {
			if pr, d := p.ProbeEntry(ctx, &e); pr != connector.ProbeInconclusive || d == "" {
				t.Errorf("%s: a system that cannot be searched probes %v (%q), want inconclusive with a reason", e.Ref(), pr, d)
			}
		}
		return
	}
	for _, e := range es {
		if e.Undecodable() {
			continue
		}
		if pr, d := p.ProbeEntry(ctx, &e); pr != connector.ProbeNotCommitted {
			t.Errorf("%s is read from the DLQ but probes %v (%s)", e.Ref(), pr, d)
		}
	}
	gone := es[0]
	gone.ID = "not-in-the-dlq-" + gone.ID
	if pr, d := p.ProbeEntry(ctx, &gone); pr != connector.ProbeCommitted {
		t.Errorf("%s is not in the DLQ but probes %v (%s)", gone.Ref(), pr, d)
	}
}

// NoSecretInEntriesOrErrors: reading src (which may fail: a refused
// credential, a system that is down) puts secret in no error and in no
// field of an entry as it would be stored.
func NoSecretInEntriesOrErrors(t *testing.T, src connector.Source, secret string) {
	t.Helper()
	if strings.Contains(src.String(), secret) {
		t.Errorf("source shown as %q", src)
	}
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error carries the secret: %v", err)
			}
			continue
		}
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), secret) {
			t.Errorf("entry carries the secret: %s", b)
		}
	}
}
