package source

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"

	"github.com/replayctl/replayctl/internal/entry"
)

// cordumRetrySuffix is what Cordum's DLQ retry appends to a job id: the
// retry is a new job `<id>-retry-<first 8 characters of a UUID>`
// (finmaster1/cordum core/controlplane/gateway/handlers_dlq.go:157 at
// e00450ed; handleRetryDLQ, newJobID := jobID + "-retry-" +
// uuid.NewString()[:8], read at 03790ac7), which the scheduler dead-letters
// again under its own id when it fails (scheduler/engine.go:3066-3085).
var cordumRetrySuffix = regexp.MustCompile(`-retry-[0-9a-f]{8}$`)

// cordumLineage is a Cordum job's lineage: the job it was retried from,
// however many retries deep ("cordum:" + the id without its -retry-
// suffixes).
func cordumLineage(jobID string) string {
	root := jobID
	if a := cordumAncestors(jobID); len(a) > 0 {
		root = a[len(a)-1]
	}
	return entry.KindCordum + ":" + root
}

// cordumAncestors are the jobs a Cordum retry job was created from,
// nearest first (none for a job that is not a retry).
func cordumAncestors(jobID string) []string {
	var out []string
	for {
		loc := cordumRetrySuffix.FindStringIndex(jobID)
		if loc == nil || loc[0] == 0 {
			return out
		}
		jobID = jobID[:loc[0]]
		out = append(out, jobID)
	}
}

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
	return entry.KindNexora + ":goal+context:" + hex.EncodeToString(h.Sum(nil))[:32]
}

// canonicalJSON re-encodes a JSON value with sorted keys and no spacing,
// numbers kept as written; a value that does not decode is used as it is.
func canonicalJSON(raw json.RawMessage) []byte {
	if !present(raw) {
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
