package nexora

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/replayctl/replayctl/internal/connector/records"
)

// nexoraLineage is a Nexora record's lineage: its goal and context. `nexora
// dlq replay` (and replayctl's replay) submits a new execution of the same
// goal and context (iamvirul/nexora nexora-cli DlqCommand.java ReplayCommand,
// new Intent(dl.goal(), dl.context()); ObserveCommand.java:197-201 at
// 8ef2c3ea), whose failure writes a new record with a new UUID
// (ExecutionEngine.java:145-158): the goal and the context are what links
// them. The context is compared as JSON values (key order and spacing do
// not matter). Two unrelated executions of the same goal and context share
// a lineage too: counted together, they reach max_replays sooner, never
// later.
func nexoraLineage(goal, context json.RawMessage) string {
	h := sha256.New()
	h.Write(canonicalJSON(goal))
	h.Write([]byte{0})
	h.Write(canonicalJSON(context))
	return Kind + ":goal+context:" + hex.EncodeToString(h.Sum(nil))[:32]
}

// canonicalJSON re-encodes a JSON value with sorted keys and no spacing,
// numbers kept as written; a value that does not decode is used as it is.
func canonicalJSON(raw json.RawMessage) []byte {
	if !records.Present(raw) {
		return []byte("null")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}
