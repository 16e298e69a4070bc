package cordum

import (
	"context"
	"fmt"
	"iter"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// Cordum's Redis layout (docs/redis-operations.md): entries at
// dlq:entry:<jobID>, ids in dlq:index, entries expire after 30 days.
const (
	redisIndexKey = "dlq:index"
	redisEntryKey = "dlq:entry:"
	redisPageSize = 500
)

// Redis reads Cordum's DLQ straight from Redis.
type Redis struct {
	spec    string
	url     string // shown: its password redacted
	opts    *redis.Options
	expired atomic.Int64
}

func NewRedis(spec, rawURL string) (*Redis, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, &connector.UsageError{Spec: spec, Err: err, Hint: "use cordum-redis:redis://HOST:PORT/DB"}
	}
	// The URL's password (redis://:PASSWORD@host) connects, through opts;
	// what is shown and stored (the source's name, errors, each entry's
	// origin) has it redacted.
	shown := redactedURL(rawURL)
	return &Redis{spec: strings.Replace(spec, rawURL, shown, 1), url: shown, opts: opts}, nil
}

// redactedURL is raw with any password in it replaced by "xxxxx".
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

func (s *Redis) String() string { return s.spec }

// Notes reports what the last read skipped: index ids whose entry key had
// expired (TTL), counted rather than silently dropped.
func (s *Redis) Notes() []string {
	if n := s.expired.Load(); n > 0 {
		return []string{fmt.Sprintf("%s: %d id(s) in %s had no %s<id> (expired by TTL): skipped", s.spec, n, redisIndexKey, redisEntryKey)}
	}
	return nil
}

// Entries pages through the index with a cursor (never the whole index in
// memory), detecting its type: a sorted set, a list or a set.
func (s *Redis) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		s.expired.Store(0)
		c := redis.NewClient(s.opts)
		defer c.Close()
		typ, err := c.Type(ctx, redisIndexKey).Result()
		if err != nil {
			yield(entry.Entry{}, fmt.Errorf("read cordum-redis source %s: %w", s.url, err))
			return
		}
		pages := s.pages(ctx, c, typ)
		for ids, err := range pages {
			if err != nil {
				yield(entry.Entry{}, fmt.Errorf("read %s (%s) from %s: %w", redisIndexKey, typ, s.url, err))
				return
			}
			if !s.page(ctx, c, ids, yield) {
				return
			}
		}
	}
}

// pages yields the index's ids a page at a time.
func (s *Redis) pages(ctx context.Context, c *redis.Client, typ string) iter.Seq2[[]string, error] {
	return func(yield func([]string, error) bool) {
		switch typ {
		case "none":
			return
		case "zset", "set":
			var cursor uint64
			for {
				var keys []string
				var err error
				if typ == "zset" {
					keys, cursor, err = c.ZScan(ctx, redisIndexKey, cursor, "", redisPageSize).Result()
					keys = everyOther(keys) // member, score, member, score...
				} else {
					keys, cursor, err = c.SScan(ctx, redisIndexKey, cursor, "", redisPageSize).Result()
				}
				if err != nil {
					yield(nil, err)
					return
				}
				if len(keys) > 0 && !yield(keys, nil) {
					return
				}
				if cursor == 0 {
					return
				}
			}
		case "list":
			for start := int64(0); ; start += redisPageSize {
				keys, err := c.LRange(ctx, redisIndexKey, start, start+redisPageSize-1).Result()
				if err != nil {
					yield(nil, err)
					return
				}
				if len(keys) > 0 && !yield(keys, nil) {
					return
				}
				if len(keys) < redisPageSize {
					return
				}
			}
		default:
			yield(nil, fmt.Errorf("%s is a %s; want a sorted set, a list or a set", redisIndexKey, typ))
		}
	}
}

func everyOther(kv []string) []string {
	out := kv[:0]
	for i := 0; i < len(kv); i += 2 {
		out = append(out, kv[i])
	}
	return out
}

// page fetches one page of entries with MGET and yields them.
func (s *Redis) page(ctx context.Context, c *redis.Client, ids []string, yield func(entry.Entry, error) bool) bool {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = redisEntryKey + id
	}
	vals, err := c.MGet(ctx, keys...).Result()
	if err != nil {
		return yield(entry.Entry{}, fmt.Errorf("read entries from %s: %w", s.url, err))
	}
	for i, v := range vals {
		if ctx.Err() != nil {
			return yield(entry.Entry{}, ctx.Err())
		}
		raw, ok := v.(string)
		if !ok { // nil: the key expired (TTL) after its id went into the index
			s.expired.Add(1)
			continue
		}
		where := s.url + " " + keys[i]
		var e entry.Entry
		if err := records.DecodeObject([]byte(raw), &e, decodeCordum, nil); err != nil {
			// Named by its job id, the key's (dlq:entry:<job_id>), not the
			// URL the source was given: the same record, the same entry.
			e = records.LiveUndecodable(KindRedis, ids[i], where, fmt.Errorf("%s", records.Describe(err)))
		} else {
			e.Source, e.Origin = KindRedis, where
			e.EnsureKey()
		}
		if !yield(e, nil) {
			return false
		}
	}
	return true
}

// Settle takes the entry out of Cordum's DLQ, whatever replayctl did with
// it, the way Cordum's own retry and delete do (DLQStore.Delete in cordum-io/cordum
// core/infra/store/dlq_store.go, called by the gateway's handleRetryDLQ
// and handleDeleteDLQ): DEL dlq:entry:<id> and removing the id from
// dlq:index, in one MULTI. A field such as replay_status would be ignored
// by Cordum: the entry would stay on its dashboard and its Retry button
// would run the job again outside replayctl's ledger. An entry already
// gone (expired, or deleted by a person) is not an error: it is out of
// the DLQ, which is what write-back wants.
func (s *Redis) Settle(ctx context.Context, e *entry.Entry, _ connector.Settlement) error {
	c := redis.NewClient(s.opts)
	defer c.Close()
	typ, err := c.Type(ctx, redisIndexKey).Result()
	if err != nil {
		return fmt.Errorf("write back %s to %s: %w", e.ID, s.url, err)
	}
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, redisEntryKey+e.ID)
		switch typ {
		case "zset":
			p.ZRem(ctx, redisIndexKey, e.ID)
		case "list":
			p.LRem(ctx, redisIndexKey, 0, e.ID)
		case "set":
			p.SRem(ctx, redisIndexKey, e.ID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write back %s to %s: %w", e.ID, s.url, err)
	}
	return nil
}

func IsRedisURL(p string) bool {
	return strings.HasPrefix(p, "redis://") || strings.HasPrefix(p, "rediss://")
}

// Replay is not Redis's: Cordum's retry is the gateway's (cordum:URL).
func (s *Redis) Replay(context.Context, connector.Request) connector.Result {
	return connector.Result{Outcome: connector.Failed, Detail: "cordum-redis: " + connector.ErrUnsupported.Error() + ": replay through a target or cordum:URL"}
}

// ProbeEntry: reading dlq:entry:<id> could tell, but is not done yet.
func (s *Redis) ProbeEntry(context.Context, *entry.Entry) (connector.ProbeResult, string) {
	return connector.ProbeInconclusive, "cordum-redis: " + connector.ErrUnsupported.Error()
}

// Ref names the entry by its job id.
func (s *Redis) Ref(e *entry.Entry) connector.Link { return connector.Link{Name: e.ID} }

// Codes lists the reason codes and job statuses Cordum writes.
func (s *Redis) Codes() []connector.Code { return Codes() }

var _ connector.Connector = (*Redis)(nil)
