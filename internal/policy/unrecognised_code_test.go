package policy

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

// bundledEngine is the decision engine replayctl ships: the real rules.yaml
// and the real Rego policy under policies/.
func bundledEngine(t testing.TB) *triage.Engine {
	t.Helper()
	g, _, err := LoadEngine(context.Background(), filepath.Join("..", "..", "rules.yaml"), bundledDir, 5*time.Second)
	if err != nil {
		t.Fatalf("load the bundled rules and policy: %v", err)
	}
	return g
}

// signalWords are the pieces messages and codes are built from: every
// built-in and bundled message pattern (each would classify a message on
// its own, most of them as transient), Cordum's job statuses and codes.
var signalWords = []string{
	"timeout", "timed out", "deadline exceeded", "connection refused", "unavailable",
	"econnreset", "upstream returned 503", "permission", "access denied", "forbidden",
	"invalid json", "parse error", "schema", "waiting for finance", "retry later",
	"rate limited", "no workers", "", " ", "\n", "ÿ", "job_status_", "delegation.",
}

// statuses are the job statuses a Cordum DLQ entry may carry (CAP
// JobStatus, written as DLQEntry.Status = status.String()), older short
// forms, and nonsense.
var statuses = []string{
	"", "JOB_STATUS_FAILED", "JOB_STATUS_FAILED_RETRYABLE", "JOB_STATUS_FAILED_FATAL",
	"JOB_STATUS_TIMEOUT", "JOB_STATUS_DENIED", "JOB_STATUS_CANCELLED", "JOB_STATUS_SUCCEEDED",
	"JOB_STATUS_UNSPECIFIED", "FAILED", "TIMEOUT", "weird", "job_status_timeout",
}

func randomText(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(4) {
		if r.IntN(3) == 0 {
			for range r.IntN(8) {
				b.WriteRune(rune(' ' + r.IntN(95)))
			}
		} else {
			b.WriteString(signalWords[r.IntN(len(signalWords))])
		}
	}
	return b.String()
}

// unknownCode returns a reason code that is in no taxonomy (the bundled
// file's included): a random one, retried until the engine agrees it is
// not known.
func unknownCode(g *triage.Engine, r *rand.Rand) string {
	for {
		code := strings.TrimSpace(randomText(r))
		if code == "" {
			continue
		}
		if !g.Rules.KnownCode(code) {
			return code
		}
	}
}

// checkNeverAutoReplayed decides one Cordum entry with an unknown code and
// fails unless its action is something other than auto_replay.
func checkNeverAutoReplayed(t *testing.T, g *triage.Engine, code, status, msg, topic string, attempts int, labels map[string]string) {
	t.Helper()
	if g.Rules.KnownCode(code) {
		return // the property is about codes outside the taxonomy
	}
	e := &entry.Entry{ID: "job-1", Source: "cordum", Topic: topic, ReasonCode: code,
		Message: msg, Attempts: attempts, Labels: labels, Payload: []byte(`{}`),
		State: entry.SourceState{JobStatus: status}}
	e.EnsureKey()
	d := g.Decide(context.Background(), e, triage.LedgerView{})
	if d.Action == triage.AutoReplay {
		t.Fatalf("code %q (not in the taxonomy), status %q, message %q, topic %q: auto_replay (%s), want anything else\nreasons: %q",
			code, status, msg, topic, d.Class, d.Reasons)
	}
}

// TestUnrecognisedCodeNeverAutoReplays is the issue-27 invariant: for any
// reason code outside the taxonomy and any message (and any job status,
// topic and attempt count), the bundled rules and policy never answer
// auto_replay. Before the fix a message pattern ("timed out waiting for
// finance") turned an unknown code into transient -> auto_replay.
func TestUnrecognisedCodeNeverAutoReplays(t *testing.T) {
	g := bundledEngine(t)
	// The report that motivated it: a worker's own code with a message
	// every pattern reads as transient.
	checkNeverAutoReplayed(t, g, "WORKER_ERROR", "JOB_STATUS_FAILED", "timed out waiting for finance", "tool.email.send", 1, nil)
	checkNeverAutoReplayed(t, g, "brand_new_code", "", "upstream returned 503", "tool.github.pr.create", 1, nil)

	r := rand.New(rand.NewPCG(27, 2026))
	topics := []string{"tool.email.send", "tool.github.pr.create", "payments.refund.create", "", "x"}
	for range 3000 {
		var labels map[string]string
		if r.IntN(4) == 0 {
			labels = map[string]string{"risk": randomText(r)}
		}
		checkNeverAutoReplayed(t, g, unknownCode(g, r), statuses[r.IntN(len(statuses))], randomText(r),
			topics[r.IntN(len(topics))], r.IntN(30), labels)
	}
}

// FuzzUnrecognisedCodeNeverAutoReplays runs the same invariant on fuzzed
// codes, statuses and messages (make fuzz-smoke).
func FuzzUnrecognisedCodeNeverAutoReplays(f *testing.F) {
	f.Add("WORKER_ERROR", "JOB_STATUS_FAILED", "timed out waiting for finance")
	f.Add("brand_new_code", "", "upstream returned 503")
	f.Add("delegation", "JOB_STATUS_TIMEOUT", "econnreset")
	f.Add("job_status_weird", "weird", "connection refused")
	g := bundledEngine(f)
	f.Fuzz(func(t *testing.T, code, status, msg string) {
		if strings.TrimSpace(code) == "" {
			return
		}
		checkNeverAutoReplayed(t, g, code, status, msg, "tool.email.send", 1, nil)
	})
}
