package replay

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/replayctl/replayctl/internal/source"
)

// execEnv names the entry to an exec target: REPLAY_ENTRY_REF,
// REPLAY_SOURCE, REPLAY_SCOPE, REPLAY_ORIGIN and, for a Prodigy item,
// REPLAY_JOB_ID, REPLAY_REPO and REPLAY_ITEM_PATH (issue 27: it got
// REPLAY_ENTRY_ID=item_0 alone, and item ids repeat across jobs).
func execEnv(r Request) []string {
	ctx := source.ReplayContext(r.Entry)
	keys := make([]string, 0, len(ctx))
	for k := range ctx {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, 0, len(keys))
	for _, k := range keys {
		env = append(env, "REPLAY_"+strings.ToUpper(k)+"="+ctx[k])
	}
	return env
}

// execEnvelope is what an exec target with stdin: entry reads.
type execEnvelope struct {
	EntryID        string            `json:"entry_id"`
	Context        map[string]string `json:"entry"`
	IdempotencyKey string            `json:"idempotency_key"`
	Attempt        int               `json:"attempt"`
	Payload        json.RawMessage   `json:"payload"`
}

// execStdin is the exec target's stdin: the payload, or with mode "entry"
// the envelope naming the entry with the payload inside.
func execStdin(mode string, r Request) ([]byte, error) {
	if mode != "entry" {
		return r.Entry.Payload, nil
	}
	p := r.Entry.Payload
	if len(p) == 0 {
		p = json.RawMessage("null")
	}
	return json.Marshal(execEnvelope{EntryID: r.Entry.ID, Context: source.ReplayContext(r.Entry),
		IdempotencyKey: r.Key, Attempt: r.Attempt, Payload: p})
}
