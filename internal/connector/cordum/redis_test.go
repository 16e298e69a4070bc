package cordum

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/replayctl/replayctl/internal/connector"
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

func readRedis(t *testing.T, src *Redis) []entry.Entry {
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
		if e.Source != KindRedis || e.Origin == "" {
			t.Fatalf("entry %+v", e)
		}
		if e.Undecodable() {
			undecodable++
			// Named by the job id of its key, stable whatever URL the
			// source is given; the key is in its Origin.
			if e.ID != "job_0013" || !strings.Contains(e.Origin, "dlq:entry:job_0013") {
				t.Fatalf("undecodable entry not named by its job id: %q (origin %q)", e.ID, e.Origin)
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
	notes := src.Notes()
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

// TestRedisWriteBackRemovesAsCordumDoes: write-back is what Cordum's own
// retry and delete do (DLQStore.Delete, cordum-io/cordum
// core/infra/store/dlq_store.go): the entry key and its index member go,
// nothing else changes; replay_status is no longer written.
func TestRedisWriteBackRemovesAsCordumDoes(t *testing.T) {
	for _, index := range []string{"zset", "list"} {
		t.Run(index, func(t *testing.T) {
			c, url := redisFixture(t, index, 3)
			src, _ := Parse("cordum-redis:" + url)
			ctx := context.Background()
			e := readRedis(t, src)[0]
			if err := src.Settle(ctx, &e, connector.Settlement{Replayed: true}); err != nil {
				t.Fatal(err)
			}
			if err := c.Get(ctx, "dlq:entry:"+e.ID).Err(); !errors.Is(err, redis.Nil) {
				t.Fatalf("entry key still there: %v", err)
			}
			var members []string
			if index == "zset" {
				members = c.ZRange(ctx, "dlq:index", 0, -1).Val()
			} else {
				members = c.LRange(ctx, "dlq:index", 0, -1).Val()
			}
			for _, m := range members {
				if m == e.ID {
					t.Fatalf("%s still in dlq:index %v", e.ID, members)
				}
			}
			if len(members) != 2 {
				t.Fatalf("index now %v, want the other two", members)
			}
			for _, again := range readRedis(t, src) {
				if again.ID == e.ID {
					t.Fatal("written-back entry read again")
				}
			}
			// An entry already gone: its index id is removed, no error.
			if err := src.Settle(ctx, &entry.Entry{ID: "job_0007"}, connector.Settlement{Replayed: true}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A Redis that asks for a password is given one in the URL
// (redis://USER:PASSWORD@host/db, as go-redis's ParseURL reads it). Found
// in the drills: the password went into the source's name, its errors and
// every entry's origin, stored in the ledger and shown in the console. It
// connects and is shown nowhere.
func TestRedisPasswordIsNeverShown(t *testing.T) {
	c, plain := redisFixture(t, "zset", 20)
	ctx := context.Background()
	if err := c.Do(ctx, "ACL", "SETUSER", "replayctl-reader", "on", ">s3cret-pw", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Do(ctx, "ACL", "DELUSER", "replayctl-reader") })
	withPW := strings.Replace(plain, "redis://", "redis://replayctl-reader:s3cret-pw@", 1)
	src, err := Parse("cordum-redis:" + withPW)
	if err != nil {
		t.Fatal(err)
	}
	got := readRedis(t, src)
	if len(got) != 19 { // one expired
		t.Fatalf("%d entries", len(got))
	}
	for _, e := range got {
		if strings.Contains(e.Origin, "s3cret") || strings.Contains(e.ID, "s3cret") {
			t.Fatalf("password in entry %q (origin %q)", e.ID, e.Origin)
		}
	}
	if s := fmt.Sprint(src, src.Notes()); strings.Contains(s, "s3cret") || !strings.Contains(s, "replayctl-reader") {
		t.Fatalf("source shown as %q", s)
	}
	wrong, err := Parse("cordum-redis:" + strings.Replace(withPW, "s3cret-pw", "s3cret-wrong", 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range wrong.Entries(ctx) {
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("wrong password: %v", err)
		}
		break
	}
}
