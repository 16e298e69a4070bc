package jsonl

import (
	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/records"
)

// File is a JSON Lines export. Its ids are only unique within the file:
// two exports may hold the same id for two different records, so it says
// which file it is (FileScope) for a run reading several to keep them
// apart (source.Distinct).
type File struct {
	records.File
	records.ReadOnly
	scope string
}

// Open is the source for the export at path.
func Open(spec, path string) *File {
	return &File{File: records.File{Spec: spec, Path: path, Format: Format()},
		ReadOnly: records.ReadOnly{Name: "jsonl", ReplayHint: "replay through a target"}, scope: records.Canonical(path)}
}

// FileScope is the file's canonical path.
func (f *File) FileScope() string { return f.scope }

// Codes: an export's reason codes are whatever it was given.
func (f *File) Codes() []connector.Code { return nil }

var _ connector.Connector = (*File)(nil)
