package source

import (
	"net/url"
	"strings"

	"github.com/replayctl/replayctl/internal/connector/kafka"
	"github.com/replayctl/replayctl/internal/connector/rabbitmq"
	"github.com/replayctl/replayctl/internal/connector/sqs"
)

// brokerHints say how each message broker's --source is written.
var brokerHints = map[string]string{
	rabbitmq.Kind: "use rabbitmq:amqp://HOST:PORT/VHOST?queue=QUEUE (user and password in the URL or RABBITMQ_USERNAME / RABBITMQ_PASSWORD)",
	kafka.Kind:    "use kafka:HOST:PORT[,HOST:PORT...]?topic=DLT_TOPIC&group=GROUP",
	sqs.Kind:      "use sqs:QUEUE_URL (region from ?region=, AWS_REGION or the sqs.REGION.amazonaws.com host)",
}

// openBroker opens a message broker's dead-letter connector (issue 28);
// ok is false for the other kinds. The connectors own their specs: the
// registry of issue 34 replaces this.
func openBroker(kind, spec string) (Source, bool, error) {
	var (
		src Source
		err error
	)
	switch kind {
	case rabbitmq.Kind:
		src, err = rabbitmq.Open(spec)
	case kafka.Kind:
		src, err = kafka.Open(spec)
	case sqs.Kind:
		src, err = sqs.Open(spec)
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	return src, true, nil
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
