package benchmark

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/testsvc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testsvc.Stop()
	os.Exit(code)
}

// TestHarnessSmoke runs the harness at tiny sizes so it cannot rot. It
// checks that every row measured something; it never asserts a time.
func TestHarnessSmoke(t *testing.T) {
	var b strings.Builder
	rows, err := Run(context.Background(), Config{Quick: true, Dir: t.TempDir(), Rules: "../../rules.yaml", Policies: "../../policies"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 9 {
		t.Fatalf("only %d rows", len(rows))
	}
	for _, r := range rows {
		if strings.HasPrefix(r.Note, "skipped") {
			if os.Getenv("CI") != "" {
				t.Errorf("%s skipped in CI: %s", r.Measure, r.Note)
			}
			continue
		}
		if r.Figure <= 0 || (r.Baseline > 0 && r.Ratio <= 0) {
			t.Errorf("row measured nothing: %+v", r)
		}
	}
	Print(&b, rows)
	t.Log("\n" + b.String())
}
