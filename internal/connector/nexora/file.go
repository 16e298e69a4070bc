package nexora

import (
	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/records"
)

// File is a Nexora dead-letter list saved to a file (a response of GET
// /api/dead-letters), read through Format. A file is not the system: it
// cannot replay, probe or settle (read the server, nexora:http(s)://...,
// for that).
type File struct {
	records.File
	records.ReadOnly
}

// OpenFile is the source for the list at path.
func OpenFile(spec, path string) *File {
	return &File{File: records.File{Spec: spec, Path: path, Format: Format()},
		ReadOnly: records.ReadOnly{Name: "nexora dump", ReplayHint: "replay through a target or read the server"}}
}

// Codes lists the failure codes Nexora writes.
func (f *File) Codes() []connector.Code { return Codes() }

var _ connector.Connector = (*File)(nil)
