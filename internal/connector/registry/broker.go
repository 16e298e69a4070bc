package registry

import (
	"net/url"
	"strings"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/kafka"
	"github.com/replayctl/replayctl/internal/connector/rabbitmq"
	"github.com/replayctl/replayctl/internal/connector/sqs"
	"github.com/replayctl/replayctl/internal/entry"
)

// Broker is a message broker's connector (RabbitMQ, Kafka, SQS): it
// replays its own entries, back where each message came from, and its
// entries' Origin is its own spec without credentials (Origin), which
// Open takes again. Destination names the queue or topic a replay of an
// entry goes to (no credentials): the name of its route, whose breaker
// and --rate it shares with the entries going there.
type Broker interface {
	connector.Connector
	Origin() string
	Destination(e *entry.Entry) string
}

// brokerHints say how each message broker's --source is written.
var brokerHints = map[string]string{
	rabbitmq.Kind: "use rabbitmq:amqp://HOST:PORT/VHOST?queue=QUEUE (user and password in the URL or RABBITMQ_USERNAME / RABBITMQ_PASSWORD)",
	kafka.Kind:    "use kafka:HOST:PORT[,HOST:PORT...]?topic=DLT_TOPIC&group=GROUP[&tls=1][&sasl=scram-sha-256|scram-sha-512|plain] (SASL user and password from KAFKA_USERNAME / KAFKA_PASSWORD)",
	sqs.Kind:      "use sqs:QUEUE_URL (region from ?region=, AWS_REGION or the sqs.REGION.amazonaws.com host)",
}

// openBroker opens a message broker's dead-letter connector (issue 28),
// its credentials and region read through getenv; ok is false for the
// other kinds. A failure is a usage error whose spec has its password
// redacted.
func openBroker(kind, spec string, getenv func(string) string) (b Broker, ok bool, err error) {
	switch kind {
	case rabbitmq.Kind:
		b, err = rabbitmq.OpenEnv(spec, getenv)
	case kafka.Kind:
		b, err = kafka.OpenEnv(spec, getenv)
	case sqs.Kind:
		b, err = sqs.OpenEnv(spec, getenv)
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, true, &connector.UsageError{Spec: redactSpec(spec), Err: err, Hint: brokerHints[kind]}
	}
	return b, true, nil
}

// brokerOrigin is the spec a stored broker entry was read from (its
// Origin, "KIND:...", without credentials); ok is false for the entries
// of other systems.
func brokerOrigin(e *entry.Entry) (string, bool) {
	if _, broker := brokerHints[e.Source]; !broker || !strings.HasPrefix(e.Origin, e.Source+":") {
		return "", false
	}
	return e.Origin, true
}

// forBroker opens a stored broker entry's connector again from its
// Origin; ok is false where that no longer opens the same connector.
func forBroker(e *entry.Entry, getenv func(string) string) (Broker, bool) {
	origin, ok := brokerOrigin(e)
	if !ok {
		return nil, false
	}
	b, _, err := openBroker(e.Source, origin, getenv)
	if err != nil || b.Origin() != origin {
		return nil, false
	}
	return b, true
}

// redactSpec hides a password in a spec's URL (rabbitmq:amqp://USER:PASS@...)
// before the spec appears in an error.
func redactSpec(spec string) string {
	kind, rest, _ := strings.Cut(spec, ":")
	if u, err := url.Parse(rest); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return kind + ":" + u.String()
		}
	}
	if i := strings.Index(rest, "@"); i >= 0 && strings.Contains(rest[:i], "://") {
		return kind + ":" + rest[:strings.Index(rest, "://")+3] + "xxxxx" + rest[i:] // unparsable: hide all user info
	}
	return spec
}
