package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/triage"
)

// get is do with the answer's headers.
func (b *apiBundle) get(path, who string) (int, http.Header, []byte) {
	b.t.Helper()
	req, err := http.NewRequest("GET", b.http.URL+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.tokens[who])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

// Issue 29: a viewer's GET /api/audit over 100k records took serve to
// 1.34 GB; /api/approvals and /api/dead-letters?size=10000000 were as
// unbounded. Every list is a page of at most MaxPageSize, and the cursor
// walks the rest: what the pages hold together is the whole list, once.
// (Memory is not asserted; the answer's size is.)
func TestEveryListIsPagedAndCapped(t *testing.T) {
	b := newAPIBundle(t, []string{line("e1", "timeout", "")})
	const n = MaxPageSize + 234
	ctx := context.Background()
	now := time.Now().UTC()
	if err := b.store.Update(ctx, func(tx store.Tx) error {
		for i := range n {
			id := fmt.Sprintf("x%05d", i)
			if _, err := tx.Append(&audit.Record{Actor: "alice", Kind: audit.KindResolve, EntryRef: "jsonl:" + id, Reason: "bulk"}); err != nil {
				return err
			}
			if err := tx.PutEntry(&store.EntryRecord{Entry: entry.Entry{Source: "jsonl", ID: id, Topic: "tool.email.send"}, Status: store.StatusManualReview}); err != nil {
				return err
			}
			if err := tx.PutApproval(&store.Approval{ID: "apr_" + id, EntryRef: "jsonl:" + id, EntryID: id, Source: "jsonl", ApproverGroup: "platform-oncall",
				State: store.ApprovalPending, RequestedBy: "ops-bot", RequestedAt: now.Add(time.Duration(i) * time.Millisecond),
				ExpiresAt: now.Add(time.Hour), Decision: triage.Decision{}}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	walk := func(path string, count func([]byte) (int, string)) {
		t.Helper()
		seen, pages, cursor := 0, 0, ""
		for {
			p := path
			if cursor != "" {
				p += "&cursor=" + cursor
			}
			code, h, body := b.get(p, "viewer")
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", p, code, body)
			}
			got, bodyCursor := count(body)
			if got > MaxPageSize {
				t.Fatalf("GET %s: %d items in one page, cap %d", p, got, MaxPageSize)
			}
			seen += got
			pages++
			cursor = h.Get(NextCursorHeader)
			if bodyCursor != "" {
				cursor = bodyCursor
			}
			if cursor == "" {
				break
			}
		}
		if seen < n || pages < 2 {
			t.Fatalf("%s: %d items in %d page(s), want all %d over at least 2", path, seen, pages, n)
		}
	}
	array := func(body []byte) (int, string) {
		var items []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			t.Fatalf("%v: %.200s", err, body)
		}
		return len(items), ""
	}
	walk("/api/audit?size=10000000", array)
	walk("/api/approvals?state=all&size=10000000", array)
	walk("/api/dead-letters?state=ALL&size=10000000", func(body []byte) (int, string) {
		var p struct {
			Items []json.RawMessage `json:"items"`
			Next  string            `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		return len(p.Items), p.Next
	})
	// A page of the audit list is exactly the records after the cursor.
	_, h, body := b.get("/api/audit?size=3&cursor=10", "viewer")
	var recs []audit.Record
	if err := json.Unmarshal(body, &recs); err != nil || len(recs) != 3 || recs[0].Seq != 11 || h.Get(NextCursorHeader) != "13" {
		t.Fatalf("page after 10: %s, next %q", body, h.Get(NextCursorHeader))
	}
	if code, _, body := b.get("/api/audit?cursor=abc", "viewer"); code != http.StatusBadRequest || !strings.Contains(string(body), "cursor") {
		t.Fatalf("bad cursor: %d %s", code, body)
	}
}

// The heavy requests in progress are bounded: past MaxHeavy the next gets
// 429 with Retry-After at once. A plan held inside its engine load keeps
// the one slot.
func TestHeavyRequestsAreBounded(t *testing.T) {
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	var b *apiBundle
	b = newAPIBundle(t, []string{line("e1", "timeout", "")}, func(c *Config) {
		c.MaxHeavy = 1
		load := c.Engine
		c.Engine = func(ctx context.Context) (*triage.Engine, triage.Snapshot, error) {
			select {
			case held <- struct{}{}:
				<-hold
			default:
			}
			return load(ctx)
		}
	})
	done := make(chan int)
	go func() {
		code, _, _ := b.get("/api/plan", "viewer")
		done <- code
	}()
	<-held
	code, h, body := b.get("/api/audit", "viewer")
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Fatalf("a second heavy request while one runs: %d (Retry-After %q) %s, want 429", code, h.Get("Retry-After"), body)
	}
	if code, _, _ := b.get("/api/runs", "viewer"); code != http.StatusOK {
		t.Fatalf("a light request while the heavy slot is taken: %d", code)
	}
	close(hold)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("the held plan: %d", code)
	}
	if code, _, _ := b.get("/api/audit", "viewer"); code != http.StatusOK {
		t.Fatalf("after the slot is free: %d", code)
	}
}
