package nexora

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
)

func TestNexora(t *testing.T) {
	path := td("nexora", "dead-letters.json")
	es := readAll(t, "nexora:"+path)
	if len(es) != 6 {
		t.Fatalf("got %d entries, want 6", len(es))
	}
	var list struct {
		Items []struct {
			Goal, Context json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(mustRead(t, path)), &list); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		id, topic, code, msg, status string
		handled                      bool
		labels                       map[string]string
	}{
		{"3f1c2a9e-5b7d-4e21-9a0c-6d8e1f2b3c41", "tool.email.send", "TIMEOUT", "step send-email timed out after 30000 ms", "PENDING", false,
			map[string]string{"team": "growth", "execution_id": "b7e4d1a0-2c3f-4a5b-8d9e-0f1a2b3c4d51"}},
		{"a1b2c3d4-0e1f-4a2b-9c3d-4e5f6a7b8c92", "payments.charge.create", "STEP_FAILED", "Card declined", "PENDING", false,
			map[string]string{"execution_id": "f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f2"}},
		{"5c6d7e8f-9a0b-4c1d-8e2f-3a4b5c6d7e83", "tool.jira.ticket.create", "SCHEMA_INVALID", "context.summary must be a string", "PENDING", false,
			map[string]string{"execution_id": "0a1b2c3d-4e5f-4061-9728-39a4b5c6d7e3"}},
		{"7e8f9a0b-1c2d-4e3f-9a4b-5c6d7e8f9a04", "tool.shop.inventory.sync", "STEP_FAILED", "storefront API returned 500", "RESOLVED", true,
			map[string]string{"execution_id": "1b2c3d4e-5f60-4172-8839-4a5b6c7d8e94", "resolve_reason": "Root cause fixed in 1.2.3"}},
		{"9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c25", "tool.email.send", "TIMEOUT", "step send-email timed out after 30000 ms", "REPLAYED", true,
			map[string]string{"execution_id": "2c3d4e5f-6071-4283-994a-5b6c7d8e9fa5"}},
		{"b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d66", "tool.github.pr.create", "", "403 Forbidden from downstream", "PENDING", false,
			map[string]string{"risk": "high", "execution_id": "3d4e5f60-7182-4394-aa5b-6c7d8e9fa0b6"}},
	}
	for i, tt := range tests {
		e := es[i]
		if e.ID != tt.id || e.Topic != tt.topic || e.ReasonCode != tt.code || e.Message != tt.msg {
			t.Errorf("entry %d: got id %q topic %q code %q message %q", i, e.ID, e.Topic, e.ReasonCode, e.Message)
		}
		if e.State.Status != tt.status || e.State.Handled != tt.handled {
			t.Errorf("%s: state %+v, want %s handled %v", tt.id, e.State, tt.status, tt.handled)
		}
		if !maps.Equal(e.Labels, tt.labels) {
			t.Errorf("%s: labels %v, want %v", tt.id, e.Labels, tt.labels)
		}
		if e.Attempts != 1 || e.Source != Kind || e.Origin != path+"#"+itoa(i) {
			t.Errorf("%s: attempts %d source %q origin %q", tt.id, e.Attempts, e.Source, e.Origin)
		}
		if e.IdempotencyKey != entry.DeriveKey(Kind, tt.id) || !e.KeyDerived {
			t.Errorf("%s: key %q should be derived", tt.id, e.IdempotencyKey)
		}
		if e.LastFailure.IsZero() || !e.FirstFailure.Equal(e.LastFailure) {
			t.Errorf("%s: failures %v .. %v", tt.id, e.FirstFailure, e.LastFailure)
		}
		want := `{"goal":` + string(list.Items[i].Goal) + `,"context":` + string(list.Items[i].Context) + `}`
		if string(e.Payload) != want {
			t.Errorf("%s: payload\n%s\nwant\n%s", tt.id, e.Payload, want)
		}
	}
}

func TestNexoraShapes(t *testing.T) {
	tests := []struct {
		name, data string
		want       []string // ids, F standing for the file path
		check      func(t *testing.T, es []entry.Entry)
	}{
		{name: "bare array", data: `[{"id":"a","goal":"g"},{"id":"b"}]`, want: []string{"a", "b"},
			check: func(t *testing.T, es []entry.Entry) {
				if string(es[1].Payload) != `{"goal":null,"context":null}` {
					t.Errorf("absent goal and context: payload %s", es[1].Payload)
				}
			}},
		{name: "items after other keys", data: `{"page":0,"meta":{"x":[1,2]},"items":[{"id":"a"}],"size":20}`, want: []string{"a"}},
		{name: "empty list", data: `{"items":[],"page":0,"size":20}`},
		{name: "loose context", data: `[{"id":"a","context":{"topic":7,"labels":{"n":1}},"attempts":3}]`, want: []string{"a"},
			check: func(t *testing.T, es []entry.Entry) {
				if e := es[0]; e.Topic != "" || e.Labels != nil || e.Attempts != 3 {
					t.Errorf("got topic %q labels %v attempts %d", e.Topic, e.Labels, e.Attempts)
				}
			}},
		{name: "context not an object", data: `[{"id":"a","context":"str"}]`, want: []string{"a"}},
		{name: "items a number", data: `{"items": 5}`, want: []string{"F"}},
		{name: "items an object", data: `{"items": {"id":"a"}}`, want: []string{"F"}},
		{name: "no items", data: `{"page":0}`, want: []string{"F"}},
		{name: "not json", data: "<html>502</html>", want: []string{"F"}},
		{name: "missing id", data: `[{"executionId":"x"}]`, want: []string{"F#0"}},
		{name: "wrong type", data: `[{"id":"a","failureCode":5},{"id":"b"}]`, want: []string{"F#0", "b"}},
		{name: "truncated", data: `{"items":[{"id":"a"},{"id":`, want: []string{"a", "F:1"}},
		{name: "truncated after items", data: `{"items":[{"id":"a"}],"page":`, want: []string{"a", "F:1"}},
		{name: "trailing garbage", data: "{\"items\":[{\"id\":\"a\"}]}\nnope", want: []string{"a", "F:2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "dl.json", tt.data)
			es := readAll(t, "nexora:"+path)
			if len(es) != len(tt.want) {
				t.Fatalf("got %v, want %v", ids(es), tt.want)
			}
			for i, e := range es {
				want := tt.want[i]
				if strings.HasPrefix(want, "F") {
					want = path + want[1:]
					if !e.Undecodable() {
						t.Errorf("entry %d should be undecodable", i)
					}
				}
				if e.ID != want {
					t.Errorf("entry %d: id %q, want %q (%s)", i, e.ID, want, e.DecodeError)
				}
			}
			if tt.check != nil {
				tt.check(t, es)
			}
		})
	}
}
