package source

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
)

// prodigySource is a directory at or above Prodigy DLQ items/ folders
// (~/.prodigy/dlq/REPO/JOB/mapreduce/dlq/JOB/items/ITEM.json).
type prodigySource struct {
	spec string
	root string
	// mu serialises MarkReplayed: removing an item rewrites the job's index.
	mu sync.Mutex
	// dirBatch overrides prodigyDirBatch (tests).
	dirBatch int
	// now stamps index.json's updated_at on a write-back (nil: time.Now).
	now func() time.Time
}

var _ WriteBack = (*prodigySource)(nil)

func (s *prodigySource) String() string { return s.spec }

// prodigyDirBatch is how many names a directory is read in at a time. A
// directory with at most this many entries is sorted; a larger one is
// streamed in the order the file system lists it, so memory does not grow
// with it (issue 16: filepath.WalkDir read and sorted a 1M-item items/
// directory whole, 252 MB peak).
const prodigyDirBatch = 4096

// Entries yields one entry per items/*.json file, walking the tree depth
// first. Order: names in lexical order within each directory of at most
// prodigyDirBatch entries (every directory of an ordinary DLQ); a larger
// directory in the order the file system lists it, which is the same on
// every read of an unchanged directory but not sorted.
func (s *prodigySource) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		// An item may be a symbolic link; where it points is checked
		// against the root resolved once per walk.
		root, rootErr := resolve(s.root)
		w := prodigyWalk{ctx: ctx, root: root, rootErr: rootErr, yield: yield, batch: cmp.Or(s.dirBatch, prodigyDirBatch),
			resumed: &prodigyResumed{}}
		err := w.dir(s.root)
		if err == nil || errors.Is(err, errStopWalk) {
			return
		}
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			yield(entry.Entry{}, err)
			return
		}
		yield(entry.Entry{}, fmt.Errorf("walk prodigy dlq %s: %w", s.root, err))
	}
}

// errStopWalk ends a walk whose consumer stopped asking for entries.
var errStopWalk = errors.New("stop walk")

// prodigyWalk walks a Prodigy DLQ tree reading each directory in batches.
type prodigyWalk struct {
	ctx     context.Context
	root    string
	rootErr error
	yield   func(entry.Entry, error) bool
	batch   int
	// resumed settles items a `prodigy resume-job` completed
	// (prodigy_resumed.go).
	resumed *prodigyResumed
}

// dir visits the directory at path: item files are read and yielded,
// subdirectories walked (symbolic links to directories are not followed).
func (w *prodigyWalk) dir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	first, err := f.ReadDir(w.batch)
	if err != nil && err != io.EOF {
		f.Close()
		return err
	}
	var next []fs.DirEntry
	if len(first) == w.batch {
		if next, err = f.ReadDir(w.batch); err != nil && err != io.EOF {
			f.Close()
			return err
		}
	}
	if len(next) == 0 {
		// Small: the whole directory is in hand; sort it, and close it
		// before going deeper so open files do not pile up.
		f.Close()
		slices.SortFunc(first, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		return w.visit(path, first)
	}
	defer f.Close()
	for batch := first; len(batch) > 0; {
		if err := w.visit(path, batch); err != nil {
			return err
		}
		if next != nil {
			batch, next = next, nil
			continue
		}
		if batch, err = f.ReadDir(w.batch); err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

func (w *prodigyWalk) visit(dir string, ents []fs.DirEntry) error {
	for _, d := range ents {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		path := filepath.Join(dir, d.Name())
		if d.IsDir() {
			if err := w.dir(path); err != nil {
				return err
			}
			continue
		}
		if !isItemFile(path) {
			continue
		}
		var e entry.Entry
		if d.Type()&fs.ModeSymlink != 0 {
			e = readProdigyLink(path, w.root, w.rootErr)
		} else {
			e = readProdigyItem(path)
		}
		if w.resumed != nil {
			w.resumed.settle(&e)
		}
		if !w.yield(e, nil) {
			return errStopWalk
		}
	}
	return nil
}

func isItemFile(path string) bool {
	return strings.HasSuffix(path, ".json") && filepath.Base(filepath.Dir(path)) == "items"
}

// readProdigyItem reads one item file. Failing to read it is not fatal: the
// item exists, so it is yielded undecodable, named by its path.
func readProdigyItem(path string) entry.Entry {
	// O_NOFOLLOW: the walk saw a plain file; one swapped for a link since
	// then must go through readProdigyLink's check, not be followed here.
	data, err := readCapped(path, syscall.O_NOFOLLOW)
	if err != nil {
		return prodigyUndecodable(path, prodigyJob(path), err)
	}
	return prodigyEntry(data, path, prodigyJob(path))
}

// readProdigyLink reads an item file that is a symbolic link. A link
// pointing outside the source root is refused without reading what it
// points at: otherwise anyone able to write into items/ could have any file
// the process can read (a key, a token file) replayed to a target. The
// refusal is an undecodable entry, so the item is quarantined as poison
// with the reason rather than skipped unseen.
func readProdigyLink(path, root string, rootErr error) entry.Entry {
	if rootErr != nil {
		return prodigyUndecodable(path, prodigyJob(path), fmt.Errorf("symbolic link refused: cannot resolve the source directory: %w", rootErr))
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return prodigyUndecodable(path, prodigyJob(path), fmt.Errorf("symbolic link refused: %w", err))
	}
	if !within(root, target) {
		return prodigyUndecodable(path, prodigyJob(path), fmt.Errorf("symbolic link to %s, outside the source directory %s: refused, not read", target, root))
	}
	data, err := readCapped(target, syscall.O_NOFOLLOW)
	if err != nil {
		return prodigyUndecodable(path, prodigyJob(path), err)
	}
	return prodigyEntry(data, path, prodigyJob(path))
}

// prodigyUndecodable is the entry for an item file that cannot be read or
// decoded, named as the item itself will be once it decodes: Prodigy writes
// item ITEM of job JOB to JOB/items/ITEM.json (iepathos/prodigy
// src/cook/execution/dlq.rs:513-517 at 1e38e57, DLQStorage::item_path), in
// place and not atomically (DLQStorage::persist, dlq.rs:520-532: tokio's
// fs::write truncates the file, then writes it), and rewrites the same file
// on each re-failure. A read meanwhile sees an empty or cut-off item. Named
// by its path, that read stayed quarantined under a name the item, decoded
// on the next run, never took. Named JOB/ITEM, the decoded read is the same
// entry and takes the quarantine's place (replay: a hold put on an
// undecodable read is lifted once the record decodes). Origin is the path;
// the key is derived apart from the decoded item's.
func prodigyUndecodable(path, job string, err error) entry.Entry {
	item := strings.TrimSuffix(filepath.Base(path), ".json")
	return entry.Entry{ID: item, Scope: job, Source: entry.KindProdigy, Origin: path, DecodeError: err.Error(),
		Labels:         map[string]string{"job_id": job},
		IdempotencyKey: entry.DeriveKey(entry.KindProdigy, "undecodable/"+job+"/"+item), KeyDerived: true}
}

// within reports whether path (resolved) is root or below it.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// readCapped reads a regular file of at most maxRecord bytes; a FIFO or
// device is refused without blocking (openRegular).
func readCapped(path string, flags int) ([]byte, error) {
	f, err := openRegular(path, flags)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRecord {
		return nil, fmt.Errorf("item file larger than %d bytes", maxRecord)
	}
	return data, nil
}

// prodigyJob is the job id: the name of the directory holding items/.
func prodigyJob(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return filepath.Base(filepath.Dir(filepath.Dir(path)))
}

// prodigyEntry turns one item file's bytes into an entry.
func prodigyEntry(data []byte, path, job string) entry.Entry {
	var e entry.Entry
	if err := decodeObject(data, &e, decodeProdigy, nil); err != nil {
		return prodigyUndecodable(path, job, errors.New(describe(err)))
	}
	e.Source = entry.KindProdigy
	e.Origin = path
	e.Scope = job
	if e.Labels == nil {
		e.Labels = map[string]string{}
	}
	e.Labels["job_id"] = job
	// Item ids repeat across jobs (item-0, item-1, ...): the job is part of
	// the identity, so it is part of the key.
	e.IdempotencyKey = entry.DeriveKey(entry.KindProdigy, job+"/"+e.ID)
	e.KeyDerived = true
	return e
}

// prodigyItem is Prodigy's DeadLetteredItem.
type prodigyItem struct {
	ItemID               string           `json:"item_id"`
	ItemData             json.RawMessage  `json:"item_data"`
	FirstAttempt         timestamp        `json:"first_attempt"`
	LastAttempt          timestamp        `json:"last_attempt"`
	FailureCount         int              `json:"failure_count"`
	FailureHistory       []prodigyFailure `json:"failure_history"`
	ErrorSignature       string           `json:"error_signature"`
	ReprocessEligible    *bool            `json:"reprocess_eligible"`
	ManualReviewRequired bool             `json:"manual_review_required"`
}

// prodigyFailure is Prodigy's FailureDetail, the fields replayctl reads.
type prodigyFailure struct {
	AttemptNumber int             `json:"attempt_number"`
	Timestamp     timestamp       `json:"timestamp"`
	ErrorType     json.RawMessage `json:"error_type"`
	ErrorMessage  string          `json:"error_message"`
	StepFailed    string          `json:"step_failed"`
}

func decodeProdigy(raw []byte, e *entry.Entry, _ *strictDecoder) error {
	var it prodigyItem
	if err := json.Unmarshal(raw, &it); err != nil {
		return err
	}
	if it.ItemID == "" {
		return errors.New("missing item_id")
	}
	*e = entry.Entry{
		ID:           it.ItemID,
		Attempts:     it.FailureCount,
		FirstFailure: it.FirstAttempt.Time,
		LastFailure:  it.LastAttempt.Time,
		State: entry.SourceState{
			ManualReviewRequired: it.ManualReviewRequired,
			ReprocessIneligible:  it.ReprocessEligible != nil && !*it.ReprocessEligible,
			ErrorSignature:       it.ErrorSignature,
		},
	}
	if len(it.ItemData) > 0 {
		// item_data is a serde_json::Value that may be null
		// (iepathos/prodigy src/cook/execution/dlq.rs DeadLetteredItem):
		// null is the item's payload, not a missing one.
		e.Payload = it.ItemData
	}
	if len(it.FailureHistory) > 0 {
		e.History = make([]entry.Failure, len(it.FailureHistory))
	}
	for i, f := range it.FailureHistory {
		variant, code, err := prodigyErrorType(f.ErrorType)
		if err != nil {
			return fmt.Errorf("failure_history[%d].error_type: %w", i, err)
		}
		e.History[i] = entry.Failure{
			Attempt:    f.AttemptNumber,
			Time:       f.Timestamp.Time,
			ReasonCode: code,
			ErrorType:  variant,
			Message:    f.ErrorMessage,
			Step:       f.StepFailed,
		}
	}
	if n := len(e.History); n > 0 {
		last := e.History[n-1]
		e.ReasonCode, e.Message = last.ReasonCode, last.Message
		e.ReasonCode = prodigyTransientCause(e.ReasonCode, e.Message, it.ReprocessEligible, it.ManualReviewRequired)
		// Prodigy overwrites the item file on each re-failure, so
		// failure_count stays 1; the last attempt_number is the count.
		e.Attempts = max(e.Attempts, last.Attempt, n)
		first, lastT := span(e.History[0].Time, last.Time)
		if e.FirstFailure.IsZero() {
			e.FirstFailure = first
		}
		if e.LastFailure.IsZero() {
			e.LastFailure = lastT
		}
	}
	e.FirstFailure, e.LastFailure = orBoth(e.FirstFailure, e.LastFailure)
	return nil
}

// prodigyErrorType reads a serde externally tagged ErrorType: a unit variant
// is a string ("Timeout"), a struct variant a one-key object
// ({"CommandFailed": {"exit_code": 101}}). It returns the variant as shown
// to people and the reason code it maps to ("" when it says nothing).
func prodigyErrorType(raw json.RawMessage) (variant, code string, err error) {
	if !present(raw) {
		return "", "", nil
	}
	var name string
	var body json.RawMessage
	switch raw[0] {
	case '"':
		if err := json.Unmarshal(raw, &name); err != nil {
			return "", "", err
		}
	case '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return "", "", err
		}
		if len(m) != 1 {
			return "", "", fmt.Errorf("want one variant, got an object with %d keys", len(m))
		}
		for k, v := range m {
			name, body = k, v
		}
	default:
		return "", "", fmt.Errorf("want a string or a one-key object, got %s", describeValue(raw))
	}
	if name != "CommandFailed" {
		return name, prodigyCode(name), nil
	}
	var cf struct {
		ExitCode *int `json:"exit_code"`
	}
	if present(body) {
		if err := json.Unmarshal(body, &cf); err != nil {
			return "", "", fmt.Errorf("CommandFailed: %s", describe(err))
		}
	}
	if cf.ExitCode == nil {
		return name, "command_failed", nil
	}
	variant = fmt.Sprintf("CommandFailed(exit %d)", *cf.ExitCode)
	switch *cf.ExitCode {
	case 124: // timeout(1)
		return variant, "timeout", nil
	case 137: // SIGKILL, usually the OOM killer
		return variant, "resource_exhausted", nil
	}
	return variant, "command_failed", nil
}

func prodigyCode(variant string) string {
	switch variant {
	case "Timeout":
		return "timeout"
	case "ResourceExhausted":
		return "resource_exhausted"
	case "ValidationFailed":
		return "validation_failed"
	case "CommitValidationFailed":
		return "commit_validation_failed"
	case "PermissionError":
		return "permission_denied"
	case "WorktreeError":
		return "worktree_error"
	case "MergeConflict":
		return "merge_conflict"
	}
	return "" // Unknown, or a variant newer than replayctl: the message decides
}

// MarkReplayed removes the item's file, as `prodigy dlq retry` does for an
// item that succeeded, and drops its id from the job's index.json. It
// refuses (ErrOutsideRoot) a file outside the source directory or not in
// an items/ directory, and a file whose item_id is not the entry's. A file
// already gone is not an error: the item is no longer dead-lettered.
func (s *prodigySource) MarkReplayed(ctx context.Context, e entry.Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.Source != entry.KindProdigy || e.Undecodable() {
		return fmt.Errorf("mark %s replayed: not a decoded prodigy entry", e.Ref())
	}
	path := e.Origin
	items, err := s.itemsDir(path)
	if err != nil {
		return fmt.Errorf("mark %s replayed: %s: %w", e.Ref(), path, err)
	}
	if job := filepath.Base(filepath.Dir(items)); e.Scope != "" && job != e.Scope {
		return fmt.Errorf("mark %s replayed: %s belongs to job %s: %w", e.Ref(), path, job, ErrOutsideRoot)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := readCapped(path, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark %s replayed: %w", e.Ref(), err)
	}
	var it struct {
		ItemID string `json:"item_id"`
	}
	if json.Unmarshal(data, &it) != nil || it.ItemID != e.ID {
		return fmt.Errorf("mark %s replayed: %s no longer holds item %s; left in place", e.Ref(), path, e.ID)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("mark %s replayed: %w", e.Ref(), err)
	}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	if err := dropFromIndex(filepath.Join(filepath.Dir(items), "index.json"), e.ID, now()); err != nil {
		return fmt.Errorf("mark %s replayed: item file removed, index not updated: %w", e.Ref(), err)
	}
	return nil
}

// itemsDir checks that path is a *.json file directly in an items/
// directory inside the root, following symbolic links, and returns that
// items/ directory resolved.
func (s *prodigySource) itemsDir(path string) (string, error) {
	if !isItemFile(path) {
		return "", ErrOutsideRoot
	}
	root, err := resolve(s.root)
	if err != nil {
		return "", err
	}
	dir, err := resolve(filepath.Dir(path))
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) ||
		filepath.Base(dir) != "items" {
		return "", ErrOutsideRoot
	}
	return dir, nil
}

func resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// dropFromIndex rewrites a Prodigy index.json without id when it lists item
// ids under "items" or "item_ids" (Prodigy writes job_id, item_count,
// item_ids, updated_at), keeping item_count in step and stamping updated_at
// with now, as Prodigy's own update_index does on every change
// (src/cook/execution/dlq.rs:615-643 at 480b22a4, line 635 writes
// Utc::now(), serialised RFC 3339 in UTC). Any other index is left alone.
// The rewrite is atomic: a temporary file renamed over the index.
func dropFromIndex(path, id string, now time.Time) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var idx map[string]json.RawMessage
	if json.Unmarshal(data, &idx) != nil {
		return nil
	}
	for _, key := range []string{"items", "item_ids"} {
		var ids []string
		if json.Unmarshal(idx[key], &ids) != nil || ids == nil {
			continue
		}
		kept := make([]string, 0, len(ids))
		for _, x := range ids {
			if x != id {
				kept = append(kept, x)
			}
		}
		if len(kept) == len(ids) {
			return nil
		}
		idx[key], _ = json.Marshal(kept)
		var n int
		if json.Unmarshal(idx["item_count"], &n) == nil {
			idx["item_count"], _ = json.Marshal(len(kept))
		}
		if _, ok := idx["updated_at"]; ok {
			idx["updated_at"], _ = json.Marshal(now.UTC().Format(time.RFC3339Nano))
		}
		// Prodigy writes the index with serde_json's to_string_pretty, keys
		// sorted: the same as MarshalIndent of a map.
		out, err := json.MarshalIndent(idx, "", "  ")
		if err != nil {
			return err
		}
		return writeAtomic(path, out)
	}
	return nil
}

func writeAtomic(path string, data []byte) error {
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
