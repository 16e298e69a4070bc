package nexora

import (
	"context"
	"fmt"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// File is a Nexora dead-letter list saved to a file (a response of GET
// /api/dead-letters), read through Format. A file is not the system: it
// cannot replay, probe or settle (read the server, nexora:http(s)://...,
// for that).
type File struct {
	records.File
}

// OpenFile is the source for the list at path.
func OpenFile(spec, path string) *File {
	return &File{File: records.File{Spec: spec, Path: path, Format: Format()}}
}

// Replay is not a dump's: replay through a target, or read the server.
func (f *File) Replay(context.Context, connector.Request) connector.Result {
	return connector.Result{Outcome: connector.Failed, Detail: "nexora dump: " + connector.ErrUnsupported.Error() + ": replay through a target or read the server"}
}

// ProbeEntry: a dump cannot say what happened to an entry since.
func (f *File) ProbeEntry(context.Context, *entry.Entry) (connector.ProbeResult, string) {
	return connector.ProbeInconclusive, "nexora dump: " + connector.ErrUnsupported.Error()
}

// Settle: a dump is not written back to.
func (f *File) Settle(context.Context, *entry.Entry, connector.Settlement) error {
	return fmt.Errorf("nexora dump: %w", connector.ErrUnsupported)
}

// Ref names the entry by its dead-letter id.
func (f *File) Ref(e *entry.Entry) connector.Link { return connector.Link{Name: e.ID} }

// Codes lists the failure codes Nexora writes.
func (f *File) Codes() []connector.Code { return Codes() }

var _ connector.Connector = (*File)(nil)
