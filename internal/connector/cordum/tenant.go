package cordum

import (
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/replayctl/replayctl/internal/entry"
)

// TenantLabel names the label holding the Cordum tenant an entry was
// read for, when a run reads several (CORDUM_TENANT_ID=acme,beta): its
// replay, probe and delete then carry that tenant (X-Tenant-ID), as the
// gateway requires (finmaster1/cordum auth/basic.go:488-496 at e00450ed,
// "tenant required"; handlers_dlq.go checks requireTenantAccess).
const TenantLabel = "cordum_tenant"

// Tenants parses CORDUM_TENANT_ID: one tenant or a comma list,
// "default" when unset (as Cordum's gateway assumes).
func Tenants(v string) []string {
	var out []string
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return []string{"default"}
	}
	return out
}

// withTenant is h with the entry's own tenant, when the run that read it
// read several (TenantLabel). The gateway checks the job's tenant against
// it (finmaster1/cordum handlers_dlq.go requireTenantAccess; "tenant
// access denied").
func withTenant(h http.Header, e *entry.Entry) http.Header {
	if e != nil {
		if tenant := e.Labels[TenantLabel]; tenant != "" {
			h.Set("X-Tenant-ID", tenant)
		}
	}
	return h
}

// notes collects what a live Cordum read could not see.
type notes struct {
	mu    sync.Mutex
	lines []string
}

func (n *notes) reset() { n.mu.Lock(); n.lines = nil; n.mu.Unlock() }

func (n *notes) add(s string) { n.mu.Lock(); n.lines = append(n.lines, s); n.mu.Unlock() }

func (n *notes) get() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.lines)
}
