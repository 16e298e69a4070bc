package maintenance

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// Pruner is a store that moves closed entries and their audit records
// into an archive (bbolt).
type Pruner interface {
	Prune(ctx context.Context, o store.PruneOptions) (*store.PruneResult, error)
}

// Retention says what the retention duty prunes and where it archives.
type Retention struct {
	// Rules is rules.yaml, read again each round for its retention.
	Rules string
	// Dir receives one new archive per round.
	Dir string
	// Key is the audit key the archive's checkpoint is signed with.
	Key []byte
}

// NewRetention is the duty behind serve --prune-every: every o.Every,
// closed entries past rules.yaml's retention are pruned into a new archive
// in r.Dir. A round that fails (a rules file that does not load, a full
// disk) prunes nothing or stops where it was; the next one finishes it.
func NewRetention(st Pruner, r Retention, o Options) (*Periodic, error) {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return NewPeriodic("retention", o, func(ctx context.Context) ([]any, error) {
		res, err := PruneOnce(ctx, st, r.Rules, r.Dir, r.Key, now())
		if err != nil || res.Entries+res.Audit+res.Approvals == 0 {
			return nil, err
		}
		return []any{"archive", res.Archive, "entries", res.Entries, "audit_records", res.Audit,
			"approvals", res.Approvals, "resumed", res.Resumed}, nil
	})
}

// PruneOnce prunes what the rules' retention (read now, as every run reads
// them) lets go, into a new archive named for the time.
func PruneOnce(ctx context.Context, st Pruner, rulesPath, dir string, key []byte, now time.Time) (*store.PruneResult, error) {
	r, _, err := triage.LoadRules(rulesPath)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	keep := r.Retention.ClosedFor()
	archive := filepath.Join(dir, "replayctl-"+now.UTC().Format("20060102T150405.000000000Z")+".jsonl.gz")
	return st.Prune(ctx, store.PruneOptions{Before: now.Add(-keep), Archive: archive, Key: key})
}
