package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/replay"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// noScanStore is the real store with its whole-store reads refused: a
// scrape or a listing that still walks every entry fails (issue 16: a
// scrape took 3 s at 100k entries, issue 19: no store scan per scrape).
type noScanStore struct {
	*bolt.Bolt
	t *testing.T
}

func (n noScanStore) Entries(context.Context, func(*store.EntryRecord) error) error {
	n.t.Error("Entries called: this read must come from the counters")
	return nil
}

func (n noScanStore) AuditRange(context.Context, uint64, func(uint64, audit.Sealed, error) error) error {
	n.t.Error("AuditRange called: this read must come from the counters")
	return nil
}

func (n noScanStore) Approvals(context.Context, func(*store.Approval) error) error {
	n.t.Error("Approvals called: a scrape reads the open requests from their index")
	return nil
}

func TestMetricsScrapeReadsCountersNotEntries(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("p1", "schema_invalid", ""), line("p2", "schema_invalid", `,"topic":"orders.eu"`)})
	b.reconcile("operator")
	m := newRunMetrics(noScanStore{b.store, t}, time.Now)
	got := gatherValues(t, m.reg)
	for k, want := range map[string]float64{
		"replayctl_entries{action=quarantine,class=poison,state=quarantined}":  2,
		"replayctl_entries{action=auto_replay,class=transient,state=replayed}": 1,
		"replayctl_open_entries{source=jsonl,topic=orders.eu}":                 1,
		"replayctl_open_entries{source=jsonl,topic=tool.email.send}":           1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], want, got)
		}
	}
	if got["replayctl_oldest_open_entry_age_seconds{}"] <= 0 {
		t.Errorf("oldest open entry age %v", got["replayctl_oldest_open_entry_age_seconds{}"])
	}
}

func TestListHonoursTopicSearchAndCursor(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("p1", "schema_invalid", `,"topic":"orders.eu"`),
		line("p2", "schema_invalid", `,"topic":"orders.us"`), line("p3", "schema_invalid", `,"topic":"billing"`)})
	b.reconcile("operator")
	list := func(q url.Values) replay.Page {
		t.Helper()
		code, body := b.do("GET", "/api/dead-letters?"+q.Encode(), "viewer", "")
		if code != http.StatusOK {
			t.Fatalf("%v: %d %s", q, code, body)
		}
		var p replay.Page
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var refs []string
	q := url.Values{"state": {"ALL"}, "topic": {"orders.*"}, "size": {"1"}}
	for range 5 {
		p := list(q)
		for _, it := range p.Items {
			refs = append(refs, it.Entry.Ref())
		}
		if p.Total != 2 || !p.TotalExact {
			t.Fatalf("total %d exact %v, want 2 exact", p.Total, p.TotalExact)
		}
		if p.Next == "" {
			break
		}
		q.Set("cursor", p.Next)
	}
	if strings.Join(refs, " ") != "jsonl:p1 jsonl:p2" {
		t.Fatalf("topic pages: %v", refs)
	}
	p := list(url.Values{"state": {"ALL"}, "q": {"KEY-P3"}})
	if len(p.Items) != 1 || p.Items[0].Entry.Ref() != "jsonl:p3" {
		t.Fatalf("q search: %+v", p.Items)
	}
	if code, body := b.do("GET", "/api/dead-letters?cursor=%25%25", "viewer", ""); code != http.StatusBadRequest {
		t.Fatalf("bad cursor: %d %s", code, body)
	}
	if code, body := b.do("GET", "/api/dead-letters?topic=orders.%5Ba", "viewer", ""); code != http.StatusBadRequest {
		t.Fatalf("bad topic glob: %d %s", code, body)
	}
	if code, body := b.do("GET", "/api/dead-letters?label=nokey", "viewer", ""); code != http.StatusBadRequest {
		t.Fatalf("bad label: %d %s", code, body)
	}
}

// ?incremental=1 walks only what was appended since the last verification.
func TestVerifyIncrementalWalksOnlyNewRecords(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", ""), line("p1", "schema_invalid", "")})
	b.reconcile("operator")
	verify := func() audit.VerifyResult {
		t.Helper()
		code, body := b.do("GET", "/api/audit/verify?incremental=1", "viewer", "")
		var res audit.VerifyResult
		if err := json.Unmarshal([]byte(body), &res); code != http.StatusOK || err != nil || !res.OK() {
			t.Fatalf("%d %s", code, body)
		}
		return res
	}
	first := verify()
	if first.From != 1 || first.Records == 0 {
		t.Fatalf("first: %+v", first)
	}
	if code, body := b.do("POST", "/api/dead-letters/jsonl:p1/resolve", "operator", `{"reason":"handled by hand"}`); code != http.StatusOK {
		t.Fatalf("resolve: %d %s", code, body)
	}
	second := verify()
	if second.From != uint64(first.Records)+1 || second.Records != first.Records+1 {
		t.Fatalf("second walked from %d (%d records), want from %d", second.From, second.Records, first.Records+1)
	}
}
