package registry

import (
	"errors"
	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/connector/nexora"
	"github.com/replayctl/replayctl/internal/connector/prodigy"
	"testing"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/connectortest"
	"github.com/replayctl/replayctl/internal/entry"
)

// TestOpenEveryKindIsAConnector: every --source kind opens to a whole
// Connector whose missing parts say ErrUnsupported.
func TestOpenEveryKindIsAConnector(t *testing.T) {
	for _, spec := range []string{
		"cordum:" + connectortest.TD("cordum", "dlq.jsonl"),
		"nexora:" + connectortest.TD("nexora", "dead-letters.json"),
		"jsonl:" + connectortest.TD("jsonl", "entries.jsonl"),
		"prodigy:" + connectortest.TD("prodigy"),
		"cordum:http://gw:8081",
		"nexora:https://nx:8090/",
		"cordum-redis:redis://127.0.0.1:1/0",
	} {
		c, err := Open(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if c.String() != spec {
			t.Errorf("%s shown as %q", spec, c)
		}
	}
	c, _ := Open("jsonl:" + connectortest.TD("jsonl", "entries.jsonl"))
	if err := c.Settle(t.Context(), &entry.Entry{ID: "x"}, connector.Settlement{Replayed: true}); !errors.Is(err, connector.ErrUnsupported) {
		t.Errorf("jsonl settle: %v, want ErrUnsupported", err)
	}
	var ue *connector.UsageError
	if _, err := Open("kafka-ish:x"); !errors.As(err, &ue) {
		t.Errorf("unknown kind: %v", err)
	}
}

// TestForEntry: a stored entry finds its system again where it can.
func TestForEntry(t *testing.T) {
	c := Credentials{CordumAPIKey: "k"}
	for _, tt := range []struct {
		e    entry.Entry
		want bool
	}{
		{entry.Entry{ID: "job_1", Source: cordum.Kind, Origin: "http://gw:8081/api/v1/dlq/page?limit=500:3"}, true},
		{entry.Entry{ID: "dl-1", Source: nexora.Kind, Origin: "https://nx/api/dead-letters?page=0:1"}, true},
		{entry.Entry{ID: "i", Scope: "job", Source: prodigy.Kind, Origin: "/d/job/items/i.json"}, true},
		{entry.Entry{ID: "job_1", Source: cordum.Kind, Origin: "dlq.jsonl:3"}, false},
		{entry.Entry{ID: "x", Source: jsonl.Kind, Origin: "e.jsonl:1"}, false},
		{entry.Entry{ID: "i", Source: prodigy.Kind, Origin: "/d/job/items/i.json", DecodeError: "bad"}, false},
	} {
		if _, ok := ForEntry(&tt.e, c); ok != tt.want {
			t.Errorf("%s from %s: found %v, want %v", tt.e.Ref(), tt.e.Origin, ok, tt.want)
		}
	}
	spec, ok := OriginTarget(&entry.Entry{Source: cordum.Kind, Origin: "http://gw:8081/api/v1/dlq/page?limit=500:3"})
	if !ok || spec != "cordum:http://gw:8081" {
		t.Errorf("origin target %q %v", spec, ok)
	}
}
