package jsonl

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// File is a JSON Lines export. Its ids are only unique within the file:
// two exports may hold the same id for two different records, so it says
// which file it is (FileScope) for a run reading several to keep them
// apart (source.Distinct).
type File struct {
	records.File
	scope string
}

// Open is the source for the export at path.
func Open(spec, path string) *File {
	scope := path
	if abs, err := filepath.Abs(path); err == nil {
		scope = abs
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			scope = real
		}
	}
	return &File{File: records.File{Spec: spec, Path: path, Format: Format()}, scope: scope}
}

// FileScope is the file's canonical path.
func (f *File) FileScope() string { return f.scope }

// Replay: an export is not a system; its entries replay through a target.
func (f *File) Replay(context.Context, connector.Request) connector.Result {
	return connector.Result{Outcome: connector.Failed, Detail: "jsonl: " + connector.ErrUnsupported.Error() + ": replay through a target"}
}

// ProbeEntry: an export cannot say what happened to an entry.
func (f *File) ProbeEntry(context.Context, *entry.Entry) (connector.ProbeResult, string) {
	return connector.ProbeInconclusive, "jsonl: " + connector.ErrUnsupported.Error()
}

// Settle: an export is not written back to.
func (f *File) Settle(context.Context, *entry.Entry, connector.Settlement) error {
	return fmt.Errorf("jsonl: %w", connector.ErrUnsupported)
}

// Ref names the entry by its id.
func (f *File) Ref(e *entry.Entry) connector.Link { return connector.Link{Name: e.ID} }

// Codes: an export's reason codes are whatever it was given.
func (f *File) Codes() []connector.Code { return nil }

var _ connector.Connector = (*File)(nil)
