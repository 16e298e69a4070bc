package prodigy

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

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// ErrOutsideRoot is wrapped by Settle's error when the entry's file
// is not a Prodigy item inside the walked root: nothing is removed.
var ErrOutsideRoot = errors.New("not a Prodigy item file inside the source directory")

// Open is the source for a directory at or above Prodigy items/ folders.
func Open(spec, root string) *Source { return &Source{spec: spec, root: root} }

// Source is a directory at or above Prodigy DLQ items/ folders
// (~/.prodigy/dlq/REPO/JOB/mapreduce/dlq/JOB/items/ITEM.json).
type Source struct {
	spec string
	root string
	// mu serialises Settle: removing an item rewrites the job's index.
	mu sync.Mutex
	// dirBatch overrides prodigyDirBatch (tests).
	dirBatch int
	// now stamps index.json's updated_at on a write-back (nil: time.Now).
	now func() time.Time
}

func (s *Source) String() string { return s.spec }

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
func (s *Source) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		// An item may be a symbolic link; where it points is checked
		// against the root resolved once per walk.
		root, rootErr := resolve(s.root)
		w := prodigyWalk{ctx: ctx, root: root, rootErr: rootErr, yield: yield, batch: cmp.Or(s.dirBatch, prodigyDirBatch),
			settle: func(job string) {
				s.mu.Lock()
				defer s.mu.Unlock()
				// An error leaves the journal for the next read; the items
				// it names are yielded meanwhile, so nothing is lost.
				_ = settleJournal(job, s.clock())
			},
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
	// settle finishes the write-backs journaled in a job directory.
	settle func(job string)
	// resumed settles items a `prodigy resume-job` completed
	// (resumed.go).
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
		if d.Name() == journalName && d.Type().IsRegular() && w.settle != nil {
			// Listed before index.json and items/: a write-back an earlier
			// run began is finished before the items are read.
			w.settle(dir)
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
	return DecodeItem(data, path, prodigyJob(path))
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
	return DecodeItem(data, path, prodigyJob(path))
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
	return entry.Entry{ID: item, Scope: job, Source: Kind, Origin: path, DecodeError: err.Error(),
		Labels:         map[string]string{"job_id": job},
		IdempotencyKey: entry.DeriveKey(Kind, "undecodable/"+job+"/"+item), KeyDerived: true}
}

// within reports whether path (resolved) is root or below it.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// readCapped reads a regular file of at most records.MaxRecord bytes; a FIFO or
// device is refused without blocking (openRegular).
func readCapped(path string, flags int) ([]byte, error) {
	f, err := records.OpenRegular(path, flags)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, records.MaxRecord+1))
	if err != nil {
		return nil, err
	}
	if len(data) > records.MaxRecord {
		return nil, fmt.Errorf("item file larger than %d bytes", records.MaxRecord)
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

// DecodeItem turns one item file's bytes into an entry.
func DecodeItem(data []byte, path, job string) entry.Entry {
	var e entry.Entry
	if err := records.DecodeObject(data, &e, decodeProdigy, nil); err != nil {
		return prodigyUndecodable(path, job, errors.New(records.Describe(err)))
	}
	e.Source = Kind
	e.Origin = path
	e.Scope = job
	if e.Labels == nil {
		e.Labels = map[string]string{}
	}
	e.Labels["job_id"] = job
	// Item ids repeat across jobs (item-0, item-1, ...): the job is part of
	// the identity, so it is part of the key.
	e.IdempotencyKey = entry.DeriveKey(Kind, job+"/"+e.ID)
	e.KeyDerived = true
	return e
}

// prodigyItem is Prodigy's DeadLetteredItem.
type prodigyItem struct {
	ItemID               string            `json:"item_id"`
	ItemData             json.RawMessage   `json:"item_data"`
	FirstAttempt         records.Timestamp `json:"first_attempt"`
	LastAttempt          records.Timestamp `json:"last_attempt"`
	FailureCount         int               `json:"failure_count"`
	FailureHistory       []prodigyFailure  `json:"failure_history"`
	ErrorSignature       string            `json:"error_signature"`
	ReprocessEligible    *bool             `json:"reprocess_eligible"`
	ManualReviewRequired bool              `json:"manual_review_required"`
}

// prodigyFailure is Prodigy's FailureDetail, the fields replayctl reads.
type prodigyFailure struct {
	AttemptNumber int               `json:"attempt_number"`
	Timestamp     records.Timestamp `json:"timestamp"`
	ErrorType     json.RawMessage   `json:"error_type"`
	ErrorMessage  string            `json:"error_message"`
	StepFailed    string            `json:"step_failed"`
}

func decodeProdigy(raw []byte, e *entry.Entry, _ *records.StrictDecoder) error {
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
		first, lastT := records.Span(e.History[0].Time, last.Time)
		if e.FirstFailure.IsZero() {
			e.FirstFailure = first
		}
		if e.LastFailure.IsZero() {
			e.LastFailure = lastT
		}
	}
	e.FirstFailure, e.LastFailure = records.OrBoth(e.FirstFailure, e.LastFailure)
	return nil
}

// prodigyErrorType reads a serde externally tagged ErrorType: a unit variant
// is a string ("Timeout"), a struct variant a one-key object
// ({"CommandFailed": {"exit_code": 101}}). It returns the variant as shown
// to people and the reason code it maps to ("" when it says nothing).
func prodigyErrorType(raw json.RawMessage) (variant, code string, err error) {
	if !records.Present(raw) {
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
		return "", "", fmt.Errorf("want a string or a one-key object, got %s", records.DescribeValue(raw))
	}
	if name != "CommandFailed" {
		return name, prodigyCode(name), nil
	}
	var cf struct {
		ExitCode *int `json:"exit_code"`
	}
	if records.Present(body) {
		if err := json.Unmarshal(body, &cf); err != nil {
			return "", "", fmt.Errorf("CommandFailed: %s", records.Describe(err))
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

// Settle removes the item's file, as `prodigy dlq retry` does for an
// item that succeeded, and drops its id from the job's index.json,
// whether replayctl replayed or a person resolved it: Prodigy keeps no
// reason. It
// refuses (ErrOutsideRoot) a file outside the source directory or not in
// an items/ directory, and a file whose item_id is not the entry's. A file
// already gone is not an error: the item is no longer dead-lettered.
func (s *Source) Settle(ctx context.Context, e *entry.Entry, _ connector.Settlement) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.Source != Kind || e.Undecodable() {
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
	job := filepath.Dir(items)
	data, err := readCapped(path, 0)
	if errors.Is(err, fs.ErrNotExist) {
		// Gone: Prodigy's own retry, or an earlier write-back. The index
		// must not list it either.
		if err := dropFromIndex(filepath.Join(job, "index.json"), e.ID, s.clock()); err != nil {
			return fmt.Errorf("mark %s replayed: item file gone, index not updated: %w", e.Ref(), err)
		}
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
	// The journal first: whatever interrupts the two steps below, the
	// next read of the source finishes them (settleJournal), whether or
	// not it yields the entry again.
	if err := appendJournal(job, journalLine{ID: e.ID, File: filepath.Base(path)}); err != nil {
		return fmt.Errorf("mark %s replayed: nothing changed: %w", e.Ref(), err)
	}
	if err := settleJournal(job, s.clock()); err != nil {
		return fmt.Errorf("mark %s replayed: %w (finished by the next read of the source)", e.Ref(), err)
	}
	return nil
}

// clock is the time a write-back stamps on index.json's updated_at.
func (s *Source) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// journalName is the file in a Prodigy job directory (next to index.json
// and items/) that lists the write-backs begun and not yet finished.
const journalName = ".replayctl-writeback.jsonl"

type journalLine struct {
	ID   string `json:"id"`
	File string `json:"file"` // the item's file name in items/
}

// appendJournal adds one write-back to the job's journal, durably.
func appendJournal(job string, l journalLine) error {
	line, err := json.Marshal(l)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(job, journalName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// settleJournal finishes every write-back the job's journal lists: drops
// the ids from index.json first, then removes the item files still
// holding those ids, then the journal. Each step is idempotent, so an
// interruption anywhere is finished by the next call.
func settleJournal(job string, now time.Time) error {
	path := filepath.Join(job, journalName)
	data, err := readCapped(path, syscall.O_NOFOLLOW)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var lines []journalLine
	for _, raw := range strings.Split(string(data), "\n") {
		var l journalLine
		if json.Unmarshal([]byte(raw), &l) != nil || l.ID == "" || l.File != filepath.Base(l.File) || !strings.HasSuffix(l.File, ".json") {
			continue // a torn last line: its item file was not touched yet
		}
		lines = append(lines, l)
	}
	for _, l := range lines {
		if err := dropFromIndex(filepath.Join(job, "index.json"), l.ID, now); err != nil {
			return fmt.Errorf("index not updated: %w", err)
		}
	}
	for _, l := range lines {
		item := filepath.Join(job, "items", l.File)
		data, err := readCapped(item, syscall.O_NOFOLLOW)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("item file not removed: %w", err)
		}
		var it struct {
			ItemID string `json:"item_id"`
		}
		if json.Unmarshal(data, &it) != nil || it.ItemID != l.ID {
			continue // no longer that item: left in place
		}
		if err := os.Remove(item); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("item file not removed: %w", err)
		}
	}
	return os.Remove(path)
}

// itemsDir checks that path is a *.json file directly in an items/
// directory inside the root, following symbolic links, and returns that
// items/ directory resolved.
func (s *Source) itemsDir(path string) (string, error) {
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

// Replay is not Prodigy's to offer: its retry is a command
// (`prodigy dlq retry`), not an endpoint; items replay through a target.
func (s *Source) Replay(context.Context, connector.Request) connector.Result {
	return connector.Result{Outcome: connector.Failed, Detail: "prodigy: " + connector.ErrUnsupported.Error() + ": replay through a target"}
}

// ProbeEntry: Prodigy keeps no record of a replay to read back.
func (s *Source) ProbeEntry(context.Context, *entry.Entry) (connector.ProbeResult, string) {
	return connector.ProbeInconclusive, "prodigy: " + connector.ErrUnsupported.Error()
}

// Ref names the item JOB/ITEM; its file is where the system shows it.
func (s *Source) Ref(e *entry.Entry) connector.Link {
	name := e.ID
	if e.Scope != "" {
		name = e.Scope + "/" + e.ID
	}
	return connector.Link{Name: name}
}

// Codes lists the reason codes Prodigy's error types become.
func (s *Source) Codes() []connector.Code { return Codes() }

var _ connector.Connector = (*Source)(nil)
