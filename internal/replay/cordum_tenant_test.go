package replay

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/entry"
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
	f.tenantOf = tenantOf
	return f
}

func countTenant(f *fakeCordum, tenant string) int {
	n := 0
	for _, t := range f.tenantOf {
		if t == tenant {
			n++
		}
	}
	return n
}

// TestLiveCordumReadsPastTenantFilteredPages: the page endpoint takes 500
// ids, drops other tenants' and expired ones, and sends next_cursor only
// when the page it kept is still full (handlers_dlq.go:64-88 at e00450ed).
// Before issue 27 a read stopped at the first short page: 250 of a
// tenant's entries, exit 0, no note. It now reads on to the end of the
// DLQ and says what it could not attribute.
func TestLiveCordumReadsPastTenantFilteredPages(t *testing.T) {
	t.Setenv("CORDUM_API_KEY", testCordumKey)
	t.Setenv("CORDUM_TENANT_ID", "acme")
	f := sharedCordum(t)
	src, err := source.Parse("cordum:" + f.URL)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		got[e.ID]++
		if f.tenantOf[e.ID] != "acme" {
			t.Errorf("%s of tenant %q read as acme", e.ID, f.tenantOf[e.ID])
		}
	}
	if want := countTenant(f, "acme"); len(got) != want {
		t.Errorf("%d of acme's %d entries read", len(got), want)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s read %d times", id, n)
		}
	}
	notes := strings.Join(src.(interface{ Notes() []string }).Notes(), "\n")
	if !strings.Contains(notes, "cannot be attributed to a tenant") || !strings.Contains(notes, "cordum-redis:") {
		t.Errorf("notes %q do not say what the gateway hid", notes)
	}

	// A probe for a job past the first short page: still in the DLQ.
	rt, err := NewCordumTarget(f.URL, 0, Credentials{CordumAPIKey: testCordumKey, CordumTenantID: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if pr, why := rt.ProbeEntry(context.Background(), &entry.Entry{ID: "job_0700"}); pr != ProbeNotCommitted {
		t.Errorf("probe of acme's job_0700 (past a filtered page): %v (%s), want not committed", pr, why)
	}
}

// TestLiveCordumSeveralTenants: CORDUM_TENANT_ID takes a comma list; one
// run reads every tenant's entries and retries each with its own tenant.
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
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, tenant := range f.tenantOf {
		if tenant == "" {
			continue
		}
		if f.retries[id] != 1 || f.retriedAs[id] != tenant {
			t.Errorf("%s (tenant %s): %d retries as %q", id, tenant, f.retries[id], f.retriedAs[id])
		}
	}
}
