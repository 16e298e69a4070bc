package cordum

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/cordum/cordumtest"
	"github.com/replayctl/replayctl/internal/entry"
)

const tenantKey = "ck-tenant-41d0"

// sharedGateway is a Cordum DLQ two tenants share, as the newest gateway
// keeps it: 350 jobs of acme and 350 of beta dead-lettered in turn, and
// 20 whose job metadata expired (job_store.go:131 at e00450ed: tenant
// unknown, dropped from every tenant's pages).
func sharedGateway(t *testing.T) *cordumtest.Gateway {
	t.Helper()
	var ids []string
	tenantOf := map[string]string{}
	for i := range 720 {
		id := fmt.Sprintf("job_%04d", i)
		ids = append(ids, id)
		switch {
		case i%36 == 35:
			tenantOf[id] = ""
		case len(ids)%2 == 0:
			tenantOf[id] = "beta"
		default:
			tenantOf[id] = "acme"
		}
	}
	f := cordumtest.New(t, tenantKey, ids...)
	f.TenantOf = tenantOf
	return f
}

func tenantEnv(tenants string) func(string) string {
	return func(k string) string {
		switch k {
		case "CORDUM_API_KEY":
			return tenantKey
		case "CORDUM_TENANT_ID":
			return tenants
		}
		return ""
	}
}

func ofTenant(f *cordumtest.Gateway, tenant string) []string {
	var out []string
	for id, t := range f.TenantOf {
		if t == tenant {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// TestLiveCordumReadsPastTenantFilteredPages: the page endpoint takes 500
// ids, drops other tenants' and expired ones, and sends next_cursor only
// when the page it kept is still full (finmaster1/cordum
// gateway/handlers_dlq.go:64-88 at e00450ed). Before issue 27 a read
// stopped at the first short page: 250 of a tenant's entries, exit 0, no
// note. It now reads on to the end of the DLQ and says what it could not
// attribute; the compensating read (walkPages too) finds a job past the
// first short page.
func TestLiveCordumReadsPastTenantFilteredPages(t *testing.T) {
	f := sharedGateway(t)
	src, err := NewLive("cordum:"+f.URL, f.URL, tenantEnv("acme"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		got[e.ID]++
		if f.TenantOf[e.ID] != "acme" {
			t.Errorf("%s of tenant %q read as acme", e.ID, f.TenantOf[e.ID])
		}
		if e.Labels[TenantLabel] != "" {
			t.Errorf("%s labelled %q with one tenant read", e.ID, e.Labels[TenantLabel])
		}
	}
	if want := len(ofTenant(f, "acme")); len(got) != want {
		t.Errorf("%d of acme's %d entries read", len(got), want)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s read %d times", id, n)
		}
	}
	notes := strings.Join(src.Notes(), "\n")
	if !strings.Contains(notes, "cannot be attributed to a tenant") || !strings.Contains(notes, "cordum-redis:") ||
		strings.Contains(notes, tenantKey) {
		t.Errorf("notes %q do not say what the gateway hid", notes)
	}

	tg, err := NewTarget(f.URL, 5*time.Second, tenantKey, "acme")
	if err != nil {
		t.Fatal(err)
	}
	acme := ofTenant(f, "acme")
	last := acme[len(acme)-1] // the oldest: past every short page
	if pr, why := tg.ProbeEntry(context.Background(), &entry.Entry{ID: last}); pr != connector.ProbeNotCommitted {
		t.Errorf("probe of acme's %s (past filtered pages): %v (%s), want not committed", last, pr, why)
	}
	if pr, why := tg.ProbeEntry(context.Background(), &entry.Entry{ID: "job_9999"}); pr != connector.ProbeCommitted {
		t.Errorf("probe of a job not in the DLQ: %v (%s), want committed", pr, why)
	}
}

// TestLiveCordumSeveralTenantsCarryTheirOwn: CORDUM_TENANT_ID takes a
// comma list; one read yields every tenant's entries once, each labelled
// with its tenant, and its retry and delete go as that tenant (the
// gateway answers 403 "tenant access denied" otherwise, handlers_dlq.go
// requireTenantAccess).
func TestLiveCordumSeveralTenantsCarryTheirOwn(t *testing.T) {
	f := sharedGateway(t)
	src, err := NewLive("cordum:"+f.URL, f.URL, tenantEnv(" acme, beta,acme"))
	if err != nil {
		t.Fatal(err)
	}
	var read []entry.Entry
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if got, want := e.Labels[TenantLabel], f.TenantOf[e.ID]; got != want {
			t.Errorf("%s labelled tenant %q, want %q", e.ID, got, want)
		}
		read = append(read, e)
	}
	if want := len(ofTenant(f, "acme")) + len(ofTenant(f, "beta")); len(read) != want {
		t.Fatalf("%d entries read, want %d", len(read), want)
	}
	var beta, acme *entry.Entry
	for i := range read {
		switch e := &read[i]; e.Labels[TenantLabel] {
		case "beta":
			beta = cmpOr(beta, e)
		case "acme":
			acme = cmpOr(acme, e)
		}
	}
	res := src.Replay(context.Background(), connector.Request{Entry: beta, Key: "k-" + beta.ID, Attempt: 1})
	if res.Outcome != connector.Succeeded {
		t.Errorf("retry of beta's %s: %v %s", beta.ID, res.Outcome, res.Detail)
	}
	if err := src.Settle(context.Background(), acme, connector.Settlement{Replayed: true}); err != nil {
		t.Errorf("delete of acme's %s: %v", acme.ID, err)
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if got := f.As[beta.ID]; !slices.Equal(got, []string{"POST as beta"}) {
		t.Errorf("%s: %q, want one retry as beta", beta.ID, got)
	}
	if got := f.As[acme.ID]; !slices.Equal(got, []string{"DELETE as acme"}) {
		t.Errorf("%s: %q, want one delete as acme", acme.ID, got)
	}
}

func cmpOr(a, b *entry.Entry) *entry.Entry {
	if a != nil {
		return a
	}
	return b
}

func TestTenants(t *testing.T) {
	for in, want := range map[string][]string{
		"": {"default"}, " , ": {"default"}, "acme": {"acme"}, " acme, beta,acme ,": {"acme", "beta"},
	} {
		if got := Tenants(in); !slices.Equal(got, want) {
			t.Errorf("Tenants(%q) = %q, want %q", in, got, want)
		}
	}
}
