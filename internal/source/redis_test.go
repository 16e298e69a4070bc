package source

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/testsvc"
)

func cordumJSON(id string) string {
	return fmt.Sprintf(`{"job_id":%q,"topic":"tool.github.pr.create","reason_code":"timeout","reason":"timed out","attempts":3,"idempotency_key":"key-%s","replay_status":"pending_review","payload":{"n":%q}}`, id, id, id)
}

func redisFixture(t *testing.T, index string, n int) (*redis.Client, string) {
	t.Helper()
	addr := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("job_%04d", i)
		switch index {
		case "zset":
			c.ZAdd(ctx, "dlq:index", redis.Z{Score: float64(i), Member: id})
		case "list":
			c.RPush(ctx, "dlq:index", id)
		}
		switch {
		case i%400 == 7: // expired: the id outlived its entry's TTL
		case i == 13:
			c.Set(ctx, "dlq:entry:"+id, `{"job_id": "job_0013", "attempts": "many"}`, time.Hour)
		default:
			c.Set(ctx, "dlq:entry:"+id, cordumJSON(id), 30*24*time.Hour)
		}
	}
	return c, "redis://" + addr + "/0"
}

func readRedis(t *testing.T, src Source) []entry.Entry {
	t.Helper()
	var out []entry.Entry
	for e, err := range src.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestRedisSourceSortedSetIndex(t *testing.T) {
	_, url := redisFixture(t, "zset", 1200)
	src, err := Parse("cordum-redis:" + url)
	if err != nil {
		t.Fatal(err)
	}
	got := readRedis(t, src)
	if len(got) != 1200-3 {
		t.Fatalf("%d entries, want 1197 (3 expired)", len(got))
	}
	seen := map[string]bool{}
	undecodable := 0
	for _, e := range got {
		if seen[e.ID] {
			t.Fatalf("duplicate %s", e.ID)
		}
		seen[e.ID] = true
		if e.Source != entry.KindCordumRedis || e.Origin == "" {
			t.Fatalf("entry %+v", e)
		}
		if e.Undecodable() {
			undecodable++
			if !strings.Contains(e.ID, "dlq:entry:job_0013") {
				t.Fatalf("undecodable entry not named by its key: %q", e.ID)
			}
			continue
		}
		if e.IdempotencyKey != "key-"+e.ID || e.ReasonCode != "timeout" || !strings.Contains(string(e.Payload), e.ID) {
			t.Fatalf("decoded %+v", e)
		}
	}
	if undecodable != 1 {
		t.Fatalf("%d undecodable", undecodable)
	}
	notes := src.(interface{ Notes() []string }).Notes()
	if len(notes) != 1 || !strings.Contains(notes[0], "3 id(s)") {
		t.Fatalf("notes %v", notes)
	}
}

func TestRedisSourceListIndex(t *testing.T) {
	_, url := redisFixture(t, "list", 620)
	src, _ := Parse("cordum-redis:" + url)
	if got := readRedis(t, src); len(got) != 620-2 {
		t.Fatalf("%d entries, want 618", len(got))
	}
}

func TestRedisSourceRejectsAStringIndex(t *testing.T) {
	addr := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	c.Set(context.Background(), "dlq:index", "oops", 0)
	src, _ := Parse("cordum-redis:redis://" + addr + "/0")
	for _, err := range src.Entries(context.Background()) {
		if err == nil || !strings.Contains(err.Error(), "want a sorted set") {
			t.Fatalf("got %v", err)
		}
		return
	}
	t.Fatal("no error")
}

func TestRedisWriteBackMarksReplayedKeepingDataAndTTL(t *testing.T) {
	c, url := redisFixture(t, "zset", 3)
	src, _ := Parse("cordum-redis:" + url)
	ctx := context.Background()
	e := readRedis(t, src)[0]
	if err := src.(WriteBack).MarkReplayed(ctx, e); err != nil {
		t.Fatal(err)
	}
	raw, err := c.Get(ctx, "dlq:entry:"+e.ID).Result()
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	_ = json.Unmarshal([]byte(raw), &fields)
	if fields["replay_status"] != "replayed" || fields["idempotency_key"] != e.IdempotencyKey || fields["payload"] == nil {
		t.Fatalf("after write-back: %s", raw)
	}
	if ttl := c.TTL(ctx, "dlq:entry:"+e.ID).Val(); ttl < 29*24*time.Hour {
		t.Fatalf("TTL lost: %s", ttl)
	}
	// Reading again: the source now says it was handled.
	for _, again := range readRedis(t, src) {
		if again.ID == e.ID && !again.State.Handled {
			t.Fatal("replayed entry not handled at the source")
		}
	}
	if err := src.(WriteBack).MarkReplayed(ctx, entry.Entry{ID: "job_0007"}); err == nil {
		t.Fatal("write-back of an expired entry succeeded")
	}
}
