package replay

import (
	"fmt"
	"testing"

	"github.com/replayctl/replayctl/internal/source"
)

// sharedCordum is a Cordum DLQ two tenants share, as the gateway keeps
// it: 350 jobs of acme and 350 of beta dead-lettered in turn, one a
// second, and 20 whose job metadata expired (job_store.go:131 at
// e00450ed: tenant unknown, dropped from every tenant's pages).
func sharedCordum(t *testing.T) *fakeCordum {
	t.Helper()
	var ids []string
	tenantOf := map[string]string{}
	for i := range 720 {
		id := fmt.Sprintf("job_%04d", i)
		ids = append(ids, id)
		switch {
		case i%36 == 35:
			tenantOf[id] = "" // expired metadata
		case len(ids)%2 == 0:
			tenantOf[id] = "beta"
		default:
			tenantOf[id] = "acme"
		}
	}
	f := newFakeCordum(t, ids...)
	f.TenantOf = tenantOf
	return f
}

func countTenant(f *fakeCordum, tenant string) int {
	n := 0
	for _, t := range f.TenantOf {
		if t == tenant {
			n++
		}
	}
	return n
}

// The reader's own test of the tenant-filtered pages is in
// internal/connector/cordum (TestLiveCordumReadsPastTenantFilteredPages).

// TestLiveCordumSeveralTenants: CORDUM_TENANT_ID takes a comma list; one
// run reads every tenant's entries, past the pages the gateway filtered
// short, and retries each with its own tenant.
func TestLiveCordumSeveralTenants(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	t.Setenv("CORDUM_TENANT_ID", "acme, beta")
	b := newBundle(t, baseRules)
	f := sharedCordum(t)
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	rep := liveRun(t, b, b.store, src)
	want := countTenant(f, "acme") + countTenant(f, "beta")
	if rep.Replays.Succeeded != want {
		t.Fatalf("%d replays succeeded, want %d (%+v)", rep.Replays.Succeeded, want, rep.Replays)
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for id, tenant := range f.TenantOf {
		if tenant == "" {
			continue
		}
		if f.Retries[id] != 1 || f.RetriedAs[id] != tenant {
			t.Errorf("%s (tenant %s): %d retries as %q", id, tenant, f.Retries[id], f.RetriedAs[id])
		}
	}
}
