package cordum

import (
	"context"
	"fmt"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// File is a Cordum DLQ dump: DLQEntry records in one file, read through
// Format. A dump is not the system: it cannot replay, probe or settle
// (read the gateway, cordum:http(s)://..., or Redis for that).
type File struct {
	records.File
}

// OpenFile is the source for the dump at path.
func OpenFile(spec, path string) *File {
	return &File{File: records.File{Spec: spec, Path: path, Format: Format()}}
}

// Replay is not a dump's: replay through a target, or read the gateway.
func (f *File) Replay(context.Context, connector.Request) connector.Result {
	return connector.Result{Outcome: connector.Failed, Detail: "cordum dump: " + connector.ErrUnsupported.Error() + ": replay through a target or read the gateway"}
}

// ProbeEntry: a dump cannot say what happened to an entry since.
func (f *File) ProbeEntry(context.Context, *entry.Entry) (connector.ProbeResult, string) {
	return connector.ProbeInconclusive, "cordum dump: " + connector.ErrUnsupported.Error()
}

// Settle: a dump is not written back to.
func (f *File) Settle(context.Context, *entry.Entry, connector.Settlement) error {
	return fmt.Errorf("cordum dump: %w", connector.ErrUnsupported)
}

// Ref names the entry by its job id.
func (f *File) Ref(e *entry.Entry) connector.Link { return connector.Link{Name: e.ID} }

// Codes lists the reason codes and job statuses Cordum writes.
func (f *File) Codes() []connector.Code { return Codes() }

var _ connector.Connector = (*File)(nil)
