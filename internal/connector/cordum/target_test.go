package cordum

import (
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/connectortest"
)

// target is Cordum's retry with secret as CORDUM_API_KEY.
func target(t testing.TB, base, secret string) connector.Dispatcher {
	ct, err := NewTarget(base, 5*time.Second, secret, "default")
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

func TestTargetConformance(t *testing.T) {
	t.Run("redirect", func(t *testing.T) { connectortest.RedirectNeverCommits(t, target) })
	t.Run("dropped", func(t *testing.T) { connectortest.DroppedConnectionNeverResent(t, target) })
	t.Run("control", func(t *testing.T) {
		got := connectortest.ControlCharacterIDsSent(t, target)
		if p := got.URL.EscapedPath(); p != "/api/v1/dlq/job%1B%5B31m%00%FF%25/retry" {
			t.Errorf("path %q", p)
		}
	})
}
