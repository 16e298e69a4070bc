package nexora

import (
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
	"github.com/replayctl/replayctl/internal/connector/nexora/nexoratest"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

const testToken = "nexora-conformance-token-31"

func envWith(tok string) func(string) string {
	return func(k string) string {
		if k == "NEXORA_TOKEN" {
			return tok
		}
		return ""
	}
}

func TestLiveConformance(t *testing.T) {
	ids := []string{"dl-1", "dl-2", "dl-3"}
	open := func(t *testing.T, f *nexoratest.Server, tok string) *Live {
		live, err := NewLive("nexora:"+f.URL, f.URL, envWith(tok))
		if err != nil {
			t.Fatal(err)
		}
		live.Retry = func() backoff.BackOff { return backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 1) }
		return live
	}
	t.Run("probe agrees with entries", func(t *testing.T) {
		f := nexoratest.New(t, testToken, nexoratest.Pending(ids...))
		tgt, err := NewTarget(f.URL, 5*time.Second, testToken)
		if err != nil {
			t.Fatal(err)
		}
		connectortest.ProbeAgreesWithEntries(t, open(t, f, testToken), tgt)
	})
	t.Run("settle idempotent", func(t *testing.T) {
		f := nexoratest.New(t, testToken, nexoratest.Pending(ids...))
		connectortest.SettleIdempotent(t, open(t, f, testToken), &entry.Entry{ID: "dl-2", Source: Kind},
			func() bool { return f.Holds("dl-2") })
	})
	t.Run("no secret", func(t *testing.T) {
		f := nexoratest.New(t, testToken, nexoratest.Pending(ids...))
		for _, tok := range []string{testToken, "nexora-wrong-token-32"} {
			connectortest.NoSecretInEntriesOrErrors(t, open(t, f, tok), tok)
		}
	})
	t.Run("undecodable", func(t *testing.T) {
		path := connectortest.WriteFile(t, "dead-letters.json", `{"items":[{"id":"a","goal":"g"},{"id":7},{"id":"b"}],"page":0,"size":100}`)
		connectortest.UndecodableStillYielded(t, &records.File{Spec: "nexora:" + path, Path: path, Format: Format()}, 2)
	})
}
