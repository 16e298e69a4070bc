package store

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/triage"
)

// A policy snapshot is stored once under its id, the sha256 of its rules
// and policy text, and audit records refer to it by that id (in the hash
// chain). `audit verify` checks the stored text still hashes to the id:
// a snapshot changed in the store would make `audit replay-decision`
// re-run a past decision on other rules than it ran with.

// MissingSnapshot is CheckSnapshot's answer for a snapshot not stored,
// given the marker's value (nil: none).
func MissingSnapshot(marker []byte) error {
	if marker == nil {
		// A deleted marker must not hide a deleted snapshot: the
		// verifier still holds records flagged SnapshotKept to theirs.
		return &audit.MissingBlobError{From: audit.NeverKept}
	}
	from, err := strconv.ParseUint(string(marker), 10, 64)
	if err != nil {
		return fmt.Errorf("snapshots kept-from marker %q: %w", marker, err)
	}
	return &audit.MissingBlobError{From: from}
}

func CheckSnapshot(id string, data []byte) error {
	var snap triage.Snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("%w: %v", audit.ErrBlobChanged, err)
	}
	if got := triage.NewSnapshot(snap.Rules, snap.Policies).ID; got != id || snap.ID != id {
		return fmt.Errorf("%w: its rules and policy text hash to %s", audit.ErrBlobChanged, got)
	}
	return nil
}
