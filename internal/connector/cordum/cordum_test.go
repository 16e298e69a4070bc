package cordum

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

func TestCordumJSONL(t *testing.T) {
	path := td("cordum", "dlq.jsonl")
	es := readAll(t, "cordum:"+path)
	lines := strings.Split(strings.TrimSuffix(mustRead(t, path), "\n"), "\n")
	if len(es) != len(lines) {
		t.Fatalf("got %d entries from %d lines", len(es), len(lines))
	}
	got := byID(t, es)

	tests := []struct {
		id, topic, code, msg string
		attempts             int
		key                  string // "" means derived
		handled              bool
		labels               map[string]string
		line                 int
	}{
		{"job_74c2", "tool.github.pr.create", "max_scheduling_retries", "max scheduling retries exceeded (attempts=50)", 50, "run_2f91:step_3", false, nil, 1},
		{"job_81a0", "tool.email.send", "TIMEOUT", "smtp relay did not answer within 30s", 3, "run_3a10:step_1", false, nil, 2},
		{"job_81a1", "tool.jira.ticket.create", "dependency_unavailable", "jira API returned 503 Service Unavailable", 5, "run_3a10:step_2", false, map[string]string{"risk": "high"}, 3},
		{"job_81a2", "tool.github.pr.create", "no_workers", "no workers available for pool github", 12, "run_3b77:step_1", true, nil, 4},
		{"job_81a3", "tool.email.send", "rate_limited", "429 Too Many Requests from smtp relay", 4, "", false, nil, 5},
		{"job_81a4", "payments.charge.create", "schema_invalid", "payload failed schema validation: amount must be an integer", 1, "run_4c02:step_2", false, map[string]string{"team": "payments"}, 6},
		{"job_81b3", "tool.email.send", "", "upstream connection refused", 2, "run_5101:step_1", false, nil, 15},
		{"job_81b4", "tool.github.pr.create", "weird_new_code", "something odd happened", 1, "run_5101:step_2", false, nil, 16},
	}
	for _, tt := range tests {
		e, ok := got[tt.id]
		if !ok {
			t.Errorf("%s missing", tt.id)
			continue
		}
		if e.Topic != tt.topic || e.ReasonCode != tt.code || e.Message != tt.msg || e.Attempts != tt.attempts {
			t.Errorf("%s: got topic %q code %q message %q attempts %d", tt.id, e.Topic, e.ReasonCode, e.Message, e.Attempts)
		}
		wantKey, derived := tt.key, false
		if wantKey == "" {
			wantKey, derived = entry.DeriveKey(Kind, tt.id), true
		}
		if e.IdempotencyKey != wantKey || e.KeyDerived != derived {
			t.Errorf("%s: key %q derived %v, want %q derived %v", tt.id, e.IdempotencyKey, e.KeyDerived, wantKey, derived)
		}
		if e.State.Handled != tt.handled {
			t.Errorf("%s: handled %v, want %v", tt.id, e.State.Handled, tt.handled)
		}
		if !maps.Equal(e.Labels, tt.labels) {
			t.Errorf("%s: labels %v, want %v", tt.id, e.Labels, tt.labels)
		}
		if want := path + ":" + itoa(tt.line); e.Origin != want || e.Source != Kind {
			t.Errorf("%s: origin %q source %q, want %q cordum", tt.id, e.Origin, e.Source, want)
		}
		var rec struct{ Payload json.RawMessage }
		json.Unmarshal([]byte(lines[tt.line-1]), &rec)
		if !bytes.Equal(e.Payload, rec.Payload) {
			t.Errorf("%s: payload %s, want %s verbatim", tt.id, e.Payload, rec.Payload)
		}
	}

	e := got["job_74c2"]
	if e.State.PolicySnapshot != "sha256:ab91c3d07e5f" || e.State.Status != "pending_review" {
		t.Errorf("job_74c2 state = %+v", e.State)
	}
	if !e.FirstFailure.Equal(ts("2026-11-03T08:12:00Z")) || !e.LastFailure.Equal(ts("2026-11-03T08:37:14Z")) {
		t.Errorf("job_74c2 failures %v .. %v", e.FirstFailure, e.LastFailure)
	}
	if e := got["job_81a2"]; !e.LastFailure.Equal(ts("2026-11-03T09:15:00Z")) {
		t.Errorf("job_81a2: updated_at must not count as a failure when failed_at is set: last %v", e.LastFailure)
	}

	bad, ok := got[path+":8"]
	if !ok || !bad.Undecodable() || bad.Origin != path+":8" || bad.Source != Kind {
		t.Errorf("line 8 should be undecodable, named %s:8: %+v", path, bad)
	}
}

func TestCordumPayloadFallback(t *testing.T) {
	path := td("cordum", "dlq.jsonl")
	lines := strings.Split(mustRead(t, path), "\n")
	got := byID(t, readAll(t, "cordum:"+path))
	// job_81b0 has request instead of payload.
	var rec struct{ Request json.RawMessage }
	json.Unmarshal([]byte(lines[11]), &rec)
	if p := got["job_81b0"].Payload; !bytes.Equal(p, rec.Request) {
		t.Errorf("request fallback: payload %s, want %s", p, rec.Request)
	}
	// job_81b2 has neither: the whole record, byte for byte.
	if p := got["job_81b2"].Payload; string(p) != lines[13] {
		t.Errorf("record fallback: payload %s, want the line verbatim", p)
	}
}

func TestCordumSingleObject(t *testing.T) {
	path := td("cordum", "entry.json")
	es := readAll(t, "cordum:"+path)
	if len(es) != 1 {
		t.Fatalf("got %d entries, want 1", len(es))
	}
	e := es[0]
	if e.ID != "job_74c2" || e.Origin != path || e.ReasonCode != "max_scheduling_retries" ||
		e.Attempts != 50 || e.IdempotencyKey != "run_2f91:step_3" || e.KeyDerived ||
		e.State.PolicySnapshot != "sha256:ab91..." || e.State.Status != "pending_review" || e.State.Handled {
		t.Errorf("got %+v", e)
	}
	if want := bytes.TrimSpace([]byte(mustRead(t, path))); !bytes.Equal(e.Payload, want) {
		t.Errorf("payload is not the record verbatim:\n%s", e.Payload)
	}
}

func TestCordumArray(t *testing.T) {
	path := td("cordum", "array.json")
	es := readAll(t, "cordum:"+path)
	if len(es) != 3 {
		t.Fatalf("got %d entries, want 3", len(es))
	}
	for i, id := range []string{"job_90a1", path + "#1", "job_90a3"} {
		if es[i].ID != id {
			t.Errorf("entry %d: id %q, want %q", i, es[i].ID, id)
		}
		if want := path + "#" + itoa(i); es[i].Origin != want {
			t.Errorf("entry %d: origin %q, want %q", i, es[i].Origin, want)
		}
	}
	if e := es[1]; !strings.Contains(e.DecodeError, "attempts") || !strings.Contains(e.DecodeError, "line 14") {
		t.Errorf("decode error %q should name the field and the line", e.DecodeError)
	}
	if p := es[2].Payload; string(p) != `{"customer": "cus_5120", "amount": 1200, "currency": "EUR"}` {
		t.Errorf("payload not verbatim: %s", p)
	}
}

// TestCordumLayouts covers how a cordum file is told apart and named.
func TestCordumLayouts(t *testing.T) {
	tests := []struct {
		name, data string
		want       []string // ids, with F for the file path
		bad        []bool   // which are undecodable
	}{
		{"objects", "{\n \"job_id\": \"a\"\n}\n{\n \"job_id\": \"b\"\n}\n", []string{"a", "b"}, []bool{false, false}},
		{"lines with a broken first line", "{\"job_id\": \"a\", \n{\"job_id\": \"b\"}\n{\"job_id\": \"c\"}\n", []string{"F:1", "b", "c"}, []bool{true, false, false}},
		{"broken object", "{\n \"job_id\": \"a\",\n \"topic\": \n", []string{"F:1"}, []bool{true}},
		{"bom and crlf", "\uFEFF{\"job_id\":\"a\"}\r\n\r\n{\"job_id\":\"b\"}\r\n", []string{"a", "b"}, []bool{false, false}},
		{"no final newline", "{\"job_id\":\"a\"}\n{\"job_id\":\"b\"}", []string{"a", "b"}, []bool{false, false}},
		{"white space only", " \n\t\r\n", nil, nil},
		{"empty array", " [ ] ", nil, nil},
		{"trailing data after array", "[{\"job_id\":\"a\"}]\n]", []string{"a", "F:2"}, []bool{false, true}},
		{"not an object in array", "[null, 1, \"x\", [], {\"job_id\":\"a\"}]", []string{"F#0", "F#1", "F#2", "F#3", "a"}, []bool{true, true, true, true, false}},
		{"missing job_id", "{\"topic\":\"t\"}\n", []string{"F:1"}, []bool{true}},
		{"empty job_id", "[{\"job_id\":\"\"}]", []string{"F#0"}, []bool{true}},
		{"labels not strings", "{\"job_id\":\"a\",\"labels\":{\"n\":1}}\n", []string{"F:1"}, []bool{true}},
		{"bad time", "{\"job_id\":\"a\",\"failed_at\":\"yesterday\"}\n", []string{"F:1"}, []bool{true}},
		{"null payload falls back", "{\"job_id\":\"a\",\"payload\":null,\"request\":{\"x\":1}}\n", []string{"a"}, []bool{false}},
		{"scalar line", "{\"job_id\":\"a\"}\n42\n", []string{"a", "F:2"}, []bool{false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "dlq.json", tt.data)
			es := readAll(t, "cordum:"+path)
			if len(es) != len(tt.want) {
				t.Fatalf("got %d entries %v, want %d", len(es), ids(es), len(tt.want))
			}
			for i, e := range es {
				want := strings.Replace(tt.want[i], "F", path, 1)
				if len(tt.want[i]) == 1 {
					want = tt.want[i]
				}
				if e.ID != want || e.Undecodable() != tt.bad[i] {
					t.Errorf("entry %d: id %q undecodable %v (%s), want %q %v", i, e.ID, e.Undecodable(), e.DecodeError, want, tt.bad[i])
				}
			}
		})
	}
}

func TestCordumObjectsNamedByLine(t *testing.T) {
	path := writeFile(t, "dlq.json", "{\n \"job_id\": \"a\"\n}\n\n{\n \"job_id\": \"b\"\n}\n")
	es := readAll(t, "cordum:"+path)
	if len(es) != 2 || es[0].Origin != path+":1" || es[1].Origin != path+":5" {
		t.Errorf("origins %q, want %s:1 and %s:5", origins(es), path, path)
	}
	if p := string(es[1].Payload); p != "{\n \"job_id\": \"b\"\n}" {
		t.Errorf("payload not verbatim: %q", p)
	}
}

func ids(es []entry.Entry) []string {
	var s []string
	for _, e := range es {
		s = append(s, e.ID)
	}
	return s
}

func origins(es []entry.Entry) []string {
	var s []string
	for _, e := range es {
		s = append(s, e.Origin)
	}
	return s
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func itoa(i int) string { return strconv.Itoa(i) }
