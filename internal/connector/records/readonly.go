package records

import (
	"context"
	"fmt"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

// ReadOnly is the part of the connector contract a file of records lacks:
// a dump or an export is not the system, so it cannot replay, probe or
// settle, and names an entry by its id. Name opens each answer (the
// kind and what the file is: "jsonl", "... dump"); ReplayHint says where a
// replay goes instead. One
// implementation for every file connector, so their answers agree.
type ReadOnly struct {
	Name       string
	ReplayHint string
}

// Replay is not a file's: it answers Failed with ErrUnsupported and the hint.
func (r ReadOnly) Replay(context.Context, connector.Request) connector.Result {
	return connector.Result{Outcome: connector.Failed, Detail: r.Name + ": " + connector.ErrUnsupported.Error() + ": " + r.ReplayHint}
}

// ProbeEntry: a file cannot say what happened to an entry since.
func (r ReadOnly) ProbeEntry(context.Context, *entry.Entry) (connector.ProbeResult, string) {
	return connector.ProbeInconclusive, r.Name + ": " + connector.ErrUnsupported.Error()
}

// Settle: a file is not written back to.
func (r ReadOnly) Settle(context.Context, *entry.Entry, connector.Settlement) error {
	return fmt.Errorf("%s: %w", r.Name, connector.ErrUnsupported)
}

// NothingToSettle: the runner has nothing to tell a file.
func (ReadOnly) NothingToSettle() {}

// Ref names the entry by its id.
func (r ReadOnly) Ref(e *entry.Entry) connector.Link { return connector.Link{Name: e.ID} }
