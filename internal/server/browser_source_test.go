package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// TestBrowserEntrySourceLink: issue #18 "the source system's own id and
// link where it has one": a Cordum entry read from a live gateway (its
// origin is the gateway's page URL and record number, as the live source
// records it; TestSourceRefLinksToTheSystem reads one for real) shows its
// job_id, a link to the job on that gateway and the dead-letter path; a
// Prodigy entry shows its item, job and DLQ item file; both fit 390 px.
func TestBrowserEntrySourceLink(t *testing.T) {
	chromium := requireChromium(t)
	f := newBrowserFixture(t)
	gw := "http://cordum-gw.internal:8081"
	if err := f.store.Update(context.Background(), func(tx store.Tx) error {
		for _, e := range []entry.Entry{
			{ID: "job-7", Source: "cordum", Origin: gw + "/api/v1/dlq/page?limit=100:1", Topic: "tool.email.send",
				ReasonCode: "pool_overloaded", Attempts: 3, IdempotencyKey: "k-job-7", Payload: []byte(`{}`)},
			{ID: "item-000001", Source: "prodigy", Scope: "job-3", Topic: "mapreduce",
				Origin:         "/home/ops/.prodigy/dlq/repo/job-3/mapreduce/dlq/job-3/items/item-000001.json",
				IdempotencyKey: "k-item", Payload: []byte(`{"n":1}`)},
		} {
			if err := tx.PutEntry(&store.EntryRecord{Entry: e, Status: store.StatusQuarantined, Class: triage.Poison,
				Action: triage.Quarantine, FirstSeen: time.Now().UTC()}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	base := f.http.URL
	b := &browserTab{t: t, ctx: startBrowser(t, chromium, 60*time.Second)}
	b.login(base, f.tokens["carol"])
	b.navigate(base + "/entries/cordum:job-7")
	if id := b.text("#source-id"); !strings.Contains(id, "Cordum job_id job-7") {
		b.fatalf("source id reads %q", id)
	}
	if href := b.eval(`document.querySelector("#source-link").href`); href != gw+"/api/v1/jobs/job-7" {
		b.fatalf("source link %q", href)
	}
	if p := b.text("#source-path"); p != gw+"/api/v1/dlq/job-7" {
		b.fatalf("dead-letter path %q", p)
	}
	b.shot("entry-cordum-source")
	b.viewport(390, 844)
	b.navigate(base + "/entries/prodigy:job-3%2Fitem-000001")
	if id := b.text("#source-id"); !strings.Contains(id, "Prodigy item_id item-000001") || !strings.Contains(id, "job job-3") {
		b.fatalf("prodigy source id reads %q", id)
	}
	if b.exists("#source-link") {
		b.fatalf("a Prodigy item file got a link")
	}
	if p := b.text("#source-path"); !strings.HasSuffix(p, "/items/item-000001.json") {
		b.fatalf("prodigy item path %q", p)
	}
	if over := b.overflowing(); len(over) > 0 {
		b.fatalf("entry page at 390 px overflows:\n%s", strings.Join(over, "\n"))
	}
	b.shot("entry-prodigy-source-390")
}
