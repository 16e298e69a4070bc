package prodigy

import (
	"path/filepath"

	"github.com/replayctl/replayctl/internal/entry"
)

// ReplayContext names a Prodigy item for a program that replays it (an
// exec target): the job id, the repository and the item file. Item ids
// repeat across Prodigy jobs (item_0, item_1, ...: iepathos/prodigy
// src/cook/execution/mapreduce executor.rs:778 at 480b22a4), so the id
// alone cannot tell which job an item belongs to. Keys with no value are
// left out.
func ReplayContext(e *entry.Entry) map[string]string {
	out := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	set("job_id", e.Scope)
	set("item_path", e.Origin)
	set("repo", repoOf(e.Origin))
	return out
}

// repoOf is the repository of a DLQ item path
// (~/.prodigy/dlq/REPO/JOB/mapreduce/dlq/JOB/items/ITEM.json), or "".
func repoOf(item string) string {
	if dir := prodigyStateDir(item); dir != "" {
		return filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(dir))))
	}
	return ""
}
