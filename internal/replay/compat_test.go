package replay

import (
	"time"

	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/nexora"
)

// The systems' own targets, as this package's tests name them.
type (
	CordumTarget = cordum.Target
	NexoraTarget = nexora.Target
)

func NewCordumTarget(base string, timeout time.Duration, c Credentials) (*CordumTarget, error) {
	return cordum.NewTarget(base, timeout, c.CordumAPIKey, c.CordumTenantID)
}

func NewNexoraTarget(base string, timeout time.Duration, c Credentials) (*NexoraTarget, error) {
	return nexora.NewTarget(base, timeout, c.NexoraToken)
}
