package cordum

import (
	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/records"
)

// File is a Cordum DLQ dump: DLQEntry records in one file, read through
// Format. A dump is not the system: it cannot replay, probe or settle
// (read the gateway, cordum:http(s)://..., or Redis for that).
type File struct {
	records.File
	records.ReadOnly
}

// OpenFile is the source for the dump at path.
func OpenFile(spec, path string) *File {
	return &File{File: records.File{Spec: spec, Path: path, Format: Format()},
		ReadOnly: records.ReadOnly{Name: "cordum dump", ReplayHint: "replay through a target or read the gateway"}}
}

// Codes lists the reason codes and job statuses Cordum writes.
func (f *File) Codes() []connector.Code { return Codes() }

var _ connector.Connector = (*File)(nil)
