package replay

import (
	"encoding/json"
	"testing"
	"time"
)

// TestOutcomeDetailAsEncodingJSON checks the outcome record's detail,
// built by hand, byte for byte against what encoding/json made of the
// map it replaces: the audit chain hashes these bytes, so a record must
// not change with the way it is built.
func TestOutcomeDetailAsEncodingJSON(t *testing.T) {
	strs := []string{"", "sink", "a b", `quo"te`, `back\slash`, "<html>&", "tab\tnew\nline\r",
		"\b\f\x00\x01\x1f\x7f", "é ü 日本", "\u2028\u2029", "bad \xff\xfe utf8", "\xe2\x80", "end\xc3"}
	dues := []time.Time{{}, time.Date(2026, 11, 27, 15, 4, 5, 123456789, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 5*3600+30*60)), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	n := 0
	for _, target := range strs {
		for _, job := range strs {
			for _, due := range dues {
				for _, nums := range [][2]int{{1, 200}, {0, 0}, {-3, 503}, {1 << 40, 999}} {
					dm := map[string]any{"target": target, "attempt": nums[0], "status": nums[1]}
					if job != "" {
						dm["new_job_id"] = job
					}
					if !due.IsZero() {
						dm["next_attempt_at"] = due
					}
					want, _ := json.Marshal(dm)
					got := outcomeDetail(target, nums[0], nums[1], job, due)
					if string(got) != string(want) {
						t.Fatalf("target %q job %q due %v %v:\n got %s\nwant %s", target, job, due, nums, got, want)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d details compared", n)
}
