package source

import (
	"path/filepath"

	"github.com/replayctl/replayctl/internal/entry"
)

// ReplayContext names an entry for a program that replays it (an exec
// target): its ref, source and scope, and, for a Prodigy item, the job id,
// the repository and the item file. Item ids repeat across Prodigy jobs
// (item_0, item_1, ...: iepathos/prodigy src/cook/execution/mapreduce
// executor.rs:778 at 480b22a4), so the id alone cannot tell which job an
// item belongs to. Keys with no value are left out.
func ReplayContext(e *entry.Entry) map[string]string {
	out := map[string]string{"entry_ref": e.Ref(), "source": e.Source}
	set := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	set("scope", e.Scope)
	set("origin", e.Origin)
	if e.Source == entry.KindProdigy {
		set("job_id", e.Scope)
		set("item_path", e.Origin)
		set("repo", prodigyRepo(e.Origin))
	}
	return out
}

// prodigyRepo is the repository of a DLQ item path
// (~/.prodigy/dlq/REPO/JOB/mapreduce/dlq/JOB/items/ITEM.json), or "".
func prodigyRepo(item string) string {
	if dir := prodigyStateDir(item); dir != "" {
		return filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(dir))))
	}
	return ""
}
