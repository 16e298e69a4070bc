package registry

import (
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/nexora"
	"github.com/replayctl/replayctl/internal/connector/prodigy"
	"github.com/replayctl/replayctl/internal/entry"
)

// Credentials for the systems replayctl replays through. They come only
// from the environment (CORDUM_API_KEY, CORDUM_TENANT_ID, NEXORA_TOKEN,
// RABBITMQ_USERNAME, RABBITMQ_PASSWORD; AWS_REGION for SQS, whose keys
// the AWS SDK's own chain reads), never from flags, and never appear in a
// Result's Detail.
type Credentials struct {
	CordumAPIKey   string
	CordumTenantID string // "default" when unset, as Cordum's gateway assumes
	NexoraToken    string
	// RabbitMQ's user, for a stored entry whose broker is opened again
	// from its Origin (which holds no credentials).
	RabbitMQUsername, RabbitMQPassword string
	AWSRegion                          string // AWS_REGION, else AWS_DEFAULT_REGION
}

// CredentialsFromEnv reads the credentials with getenv (os.Getenv).
func CredentialsFromEnv(getenv func(string) string) Credentials {
	c := Credentials{
		CordumAPIKey:   getenv("CORDUM_API_KEY"),
		CordumTenantID: getenv("CORDUM_TENANT_ID"),
		NexoraToken:    getenv("NEXORA_TOKEN"),

		RabbitMQUsername: getenv("RABBITMQ_USERNAME"),
		RabbitMQPassword: getenv("RABBITMQ_PASSWORD"),
		AWSRegion:        getenv("AWS_REGION"),
	}
	if c.AWSRegion == "" {
		c.AWSRegion = getenv("AWS_DEFAULT_REGION")
	}
	if c.CordumTenantID == "" {
		c.CordumTenantID = "default"
	}
	return c
}

// getenv is the environment as Credentials hold it.
func (c Credentials) getenv(k string) string {
	switch k {
	case "CORDUM_API_KEY":
		return c.CordumAPIKey
	case "CORDUM_TENANT_ID":
		return c.CordumTenantID
	case "NEXORA_TOKEN":
		return c.NexoraToken
	case "RABBITMQ_USERNAME":
		return c.RabbitMQUsername
	case "RABBITMQ_PASSWORD":
		return c.RabbitMQPassword
	case "AWS_REGION":
		return c.AWSRegion
	}
	return ""
}

// Native is a system's own replay path: the dispatcher, which also
// probes by entry (connector.EntryProber).
type Native interface {
	connector.Dispatcher
	connector.Prober
	connector.EntryProber
}

// NativeTarget builds the replay path a --target or rules.yaml value
// names: "cordum:URL" (Cordum's retry) or "nexora:URL" (Nexora's replay).
// ok is false for any other kind (a plain URL is the webhook connector's).
func NativeTarget(spec string, timeout time.Duration, c Credentials) (n Native, ok bool, err error) {
	kind, base, _ := strings.Cut(spec, ":")
	switch kind {
	case entry.KindCordum:
		n, err = cordum.NewTarget(base, timeout, c.CordumAPIKey, c.CordumTenantID)
	case entry.KindNexora:
		n, err = nexora.NewTarget(base, timeout, c.NexoraToken)
	default:
		return nil, false, nil
	}
	return n, true, err
}

// OriginTarget is the native target spec ("cordum:BASE", "nexora:BASE")
// of an entry read from a live Cordum or Nexora: its Origin is BASE +
// "/api/..." (the page it was read from).
func OriginTarget(e *entry.Entry) (string, bool) {
	if e.Source != entry.KindCordum && e.Source != entry.KindNexora {
		return "", false
	}
	u, err := url.Parse(e.Origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	base, _, ok := strings.Cut(e.Origin, "/api/")
	if !ok {
		return "", false
	}
	return e.Source + ":" + base, true
}

// ForEntry finds a stored entry's connector again from what the entry
// recorded of where it was read: the live Cordum gateway or Nexora server
// it was paged from, the Prodigy job directory its item file is in, the
// broker queue or topic (its Origin, credentials from c). ok is false
// where the entry cannot reach its system again: a file dump, a JSONL
// export, a Redis URL whose password was redacted when stored.
func ForEntry(e *entry.Entry, c Credentials) (Source, bool) {
	if _, ok := brokerOrigin(e); ok {
		b, ok := forBroker(e, c.getenv)
		if !ok {
			return nil, false
		}
		return b, true
	}
	if spec, ok := OriginTarget(e); ok {
		kind, base, _ := strings.Cut(spec, ":")
		var (
			s   Source
			err error
		)
		if kind == entry.KindCordum {
			s, err = cordum.NewLive(spec, base, c.getenv)
		} else {
			s, err = nexora.NewLive(spec, base, c.getenv)
		}
		return s, err == nil
	}
	if e.Source == entry.KindProdigy && !e.Undecodable() && e.Origin != "" {
		// ITEM.json in JOB/items/: the job directory is the narrowest root
		// that still holds the item, and MarkReplayed checks it is inside.
		job := filepath.Dir(filepath.Dir(e.Origin))
		return prodigy.Open(entry.KindProdigy+":"+job, job), true
	}
	return nil, false
}

// BrokerFor is For for the entry of a message broker: the connector that
// replays it back where it came from (Replay). ok is false for the
// entries of other systems and where the broker cannot be opened again.
func (f *Finder) BrokerFor(e *entry.Entry) (Broker, bool) {
	if _, ok := brokerOrigin(e); !ok {
		return nil, false
	}
	s, ok := f.For(e)
	if !ok {
		return nil, false
	}
	b, ok := s.(Broker)
	return b, ok
}

// Finder is ForEntry with the connectors it built kept, so that a bulk
// replay of many entries of one system shares one client.
type Finder struct {
	Creds Credentials
	mu    sync.Mutex
	seen  map[string]Source
}

// Add makes the broker connectors among srcs (a run's sources) the ones
// For finds for their entries: they hold the credentials given in their
// spec, which an entry's Origin does not.
func (f *Finder) Add(srcs ...connector.Source) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range srcs {
		if b, ok := s.(Broker); ok {
			if f.seen == nil {
				f.seen = map[string]Source{}
			}
			f.seen[b.Origin()] = b
		}
	}
}

// For is ForEntry, cached by the system the entry came from (a live
// base, a broker's queue or topic, or a Prodigy job directory).
func (f *Finder) For(e *entry.Entry) (Source, bool) {
	key, ok := OriginTarget(e)
	if !ok {
		key, ok = brokerOrigin(e)
	}
	if !ok {
		return ForEntry(e, f.Creds) // Prodigy: cheap, no client
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, hit := f.seen[key]; hit {
		return s, s != nil
	}
	s, ok := ForEntry(e, f.Creds)
	if f.seen == nil {
		f.seen = map[string]Source{}
	}
	if !ok {
		s = nil
	}
	f.seen[key] = s
	return s, ok
}
