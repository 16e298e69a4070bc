package jsonl

import (
	"testing"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
)

func TestConformance(t *testing.T) {
	t.Run("undecodable", func(t *testing.T) {
		path := connectortest.WriteFile(t, "e.jsonl", `{"id":"a"}`+"\n"+`{"id":"x","extra":1}`+"\n"+`{"id":"b"}`+"\n")
		connectortest.UndecodableStillYielded(t, Open("jsonl:"+path, path), 2)
	})
}
