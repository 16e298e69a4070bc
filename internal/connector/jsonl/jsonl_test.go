package jsonl

import (
	"maps"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
)

func TestJSONL(t *testing.T) {
	path := td("jsonl", "entries.jsonl")
	es := readAll(t, "jsonl:"+path)
	if len(es) != 6 {
		t.Fatalf("got %d entries, want 6", len(es))
	}
	got := byID(t, es)

	e := got["evt-0002"]
	if e.Topic != "payments.charge.create" || e.ReasonCode != "rate_limited" || e.Message != "provider returned 429" ||
		e.Attempts != 3 || e.IdempotencyKey != "charge-ord-8812" || e.KeyDerived ||
		!maps.Equal(e.Labels, map[string]string{"risk": "high", "team": "payments"}) ||
		string(e.Payload) != `{"order":"ord-8812","amount":1500,"currency":"EUR"}` ||
		!e.FirstFailure.Equal(ts("2026-11-07T06:10:00Z")) || !e.LastFailure.Equal(ts("2026-11-07T06:40:00Z")) ||
		e.Origin != path+":2" || e.Source != Kind {
		t.Errorf("evt-0002 = %+v", e)
	}

	e = got["evt-0004"]
	if !e.State.Handled || e.State.Status != "replayed" || !e.KeyDerived ||
		e.IdempotencyKey != entry.DeriveKey(Kind, "evt-0004") {
		t.Errorf("evt-0004 = %+v", e)
	}
	if e := got["evt-0006"]; !e.LastFailure.Equal(e.FirstFailure) || e.LastFailure.IsZero() {
		t.Errorf("evt-0006: a lone first_failure should fill last_failure: %v .. %v", e.FirstFailure, e.LastFailure)
	}

	bad, ok := got[path+":5"]
	if !ok || !strings.Contains(bad.DecodeError, `unknown field "priority"`) {
		t.Errorf("line 5 should be undecodable for its unknown field: %+v", bad)
	}
}

func TestJSONLStrict(t *testing.T) {
	tests := []struct{ name, line, mention string }{
		{"unknown field", `{"id":"a","extra":1}`, `unknown field "extra"`},
		{"missing id", `{"topic":"t"}`, "missing id"},
		{"two records on a line", `{"id":"a"} {"id":"b"}`, "after the record"},
		{"wrong type", `{"id":"a","attempts":"2"}`, "attempts"},
		{"source_state object", `{"id":"a","source_state":{"status":"x"}}`, "source_state"},
		{"null", `null`, "null"},
		{"array", `[{"id":"a"}]`, "array"},
		{"truncated", `{"id":"a"`, "invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "e.jsonl", tt.line+"\n")
			es := readAll(t, "jsonl:"+path)
			if len(es) != 1 || es[0].ID != path+":1" || !strings.Contains(es[0].DecodeError, tt.mention) {
				t.Errorf("got %+v, want one undecodable entry %s:1 mentioning %q", es, path, tt.mention)
			}
		})
	}
}
