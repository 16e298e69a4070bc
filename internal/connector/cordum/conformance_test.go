package cordum

import (
	"fmt"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
	"github.com/replayctl/replayctl/internal/connector/cordum/cordumtest"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

const testKey = "cordum-conformance-key-77"

func envWith(key string) func(string) string {
	return func(k string) string {
		if k == "CORDUM_API_KEY" {
			return key
		}
		return ""
	}
}

func TestLiveConformance(t *testing.T) {
	ids := []string{"job_a", "job_b", "job_c"}
	t.Run("probe agrees with entries", func(t *testing.T) {
		f := cordumtest.New(t, testKey, ids...)
		live, err := NewLive("cordum:"+f.URL, f.URL, envWith(testKey))
		if err != nil {
			t.Fatal(err)
		}
		tgt, err := NewTarget(f.URL, 5*time.Second, testKey, "")
		if err != nil {
			t.Fatal(err)
		}
		connectortest.ProbeAgreesWithEntries(t, live, tgt)
	})
	t.Run("settle idempotent", func(t *testing.T) {
		f := cordumtest.New(t, testKey, ids...)
		live, err := NewLive("cordum:"+f.URL, f.URL, envWith(testKey))
		if err != nil {
			t.Fatal(err)
		}
		connectortest.SettleIdempotent(t, live, &entry.Entry{ID: "job_b", Source: Kind},
			func() bool { return f.Holds("job_b") })
	})
	t.Run("no secret", func(t *testing.T) {
		f := cordumtest.New(t, testKey, ids...)
		for _, key := range []string{testKey, "cordum-wrong-key-78"} { // read, and refused
			live, err := NewLive(fmt.Sprintf("cordum:%s", f.URL), f.URL, envWith(key))
			if err != nil {
				t.Fatal(err)
			}
			live.Retry = func() backoff.BackOff { return backoff.WithMaxRetries(&backoff.ZeroBackOff{}, 1) }
			connectortest.NoSecretInEntriesOrErrors(t, live, key)
		}
	})
	t.Run("undecodable", func(t *testing.T) {
		path := connectortest.WriteFile(t, "dlq.jsonl", `{"job_id":"a","topic":"t"}`+"\n"+`{"job_id":`+"\n"+`{"job_id":"b","topic":"t"}`+"\n")
		connectortest.UndecodableStillYielded(t, &records.File{Spec: "cordum:" + path, Path: path, Format: Format()}, 2)
	})
}
