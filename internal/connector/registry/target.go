package registry

import (
	"sync"

	"github.com/replayctl/replayctl/internal/connector"
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
