package prodigy

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// maxCheckpoint bounds the read of one Prodigy job checkpoint.
const maxCheckpoint = 256 << 20

// prodigyResumed knows, per job, which items `prodigy resume-job` has
// completed since they were dead-lettered. resume-job re-runs the job's
// pending items and its reprocess-eligible DLQ items
// (iepathos/prodigy src/cook/execution/mapreduce_resume.rs:389-396,
// 445-467 and src/cook/execution/resume.rs:817-825 at 480b22a4;
// load_dlq_items, read at 028fdfc7) and never removes them from the DLQ,
// so an item a resume completed stays there, and a replay would run it a
// second time. Its job state (MapReduceJobState, saved as
// checkpoint-v{N}.json in ~/.prodigy/state/{repo}/mapreduce/jobs/{job_id}/,
// checkpoint/manager.rs checkpoint_path at 3a2a90d2) records each agent's
// result: item_id and status, "Success" for a completed item.
type prodigyResumed struct {
	mu   sync.Mutex
	jobs map[string]map[string]string // state dir -> item id -> checkpoint file
}

// settle marks e handled at its source when its job's latest checkpoint
// shows its item completed. The state directory is found from the DLQ
// item's path: ~/.prodigy/dlq/REPO/JOB/mapreduce/dlq/JOB/items/ITEM.json ->
// ~/.prodigy/state/REPO/mapreduce/jobs/JOB/. A layout that does not match,
// or a checkpoint that cannot be read, settles nothing.
func (r *prodigyResumed) settle(e *entry.Entry) {
	if e.Undecodable() || e.Scope == "" {
		return
	}
	dir := prodigyStateDir(e.Origin)
	if dir == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs == nil {
		r.jobs = map[string]map[string]string{}
	}
	done, ok := r.jobs[dir]
	if !ok {
		done = readCompleted(dir)
		r.jobs[dir] = done
	}
	if file, ok := done[e.ID]; ok {
		e.State.Handled = true
		e.State.Status = "completed by prodigy resume-job (" + file + ")"
	}
}

// prodigyStateDir is the job state directory of a DLQ item path, or "".
func prodigyStateDir(item string) string {
	abs, err := filepath.Abs(item)
	if err != nil {
		return ""
	}
	items := filepath.Dir(abs)
	job := filepath.Dir(items)
	dlq := filepath.Dir(job)
	mr := filepath.Dir(dlq)
	outerJob := filepath.Dir(mr)
	repo := filepath.Dir(outerJob)
	dlqRoot := filepath.Dir(repo)
	if filepath.Base(items) != "items" || filepath.Base(dlq) != "dlq" || filepath.Base(mr) != "mapreduce" ||
		filepath.Base(dlqRoot) != "dlq" || filepath.Base(outerJob) != filepath.Base(job) {
		return ""
	}
	home := filepath.Dir(dlqRoot)
	return filepath.Join(home, "state", filepath.Base(repo), "mapreduce", "jobs", filepath.Base(job))
}

// readCompleted reads the latest checkpoint-v{N}.json of a job state
// directory: item id -> that file, for every agent result whose status is
// Success.
func readCompleted(dir string) map[string]string {
	out := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	best, bestV := "", -1
	for _, d := range ents {
		n := d.Name()
		if !strings.HasPrefix(n, "checkpoint-v") || !strings.HasSuffix(n, ".json") || !d.Type().IsRegular() {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(n, "checkpoint-v"), ".json"))
		if err == nil && v > bestV {
			best, bestV = n, v
		}
	}
	if best == "" {
		return out
	}
	f, err := records.OpenRegular(filepath.Join(dir, best), syscall.O_NOFOLLOW)
	if err != nil {
		return out
	}
	defer f.Close()
	var st struct {
		AgentResults map[string]struct {
			ItemID string          `json:"item_id"`
			Status json.RawMessage `json:"status"`
		} `json:"agent_results"`
	}
	if json.NewDecoder(io.LimitReader(f, maxCheckpoint)).Decode(&st) != nil {
		return out
	}
	for _, r := range st.AgentResults {
		var s string
		if r.ItemID != "" && json.Unmarshal(r.Status, &s) == nil && s == "Success" {
			out[r.ItemID] = filepath.Join(dir, best)
		}
	}
	return out
}
