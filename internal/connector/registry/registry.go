// Package registry lists replayctl's connectors: it turns a --source
// value into the connector that reads it (Open), and finds a stored
// entry's connector again (ForEntry). It is the one place outside a
// connector's own package that names the systems.
package registry

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/connector/nexora"
	"github.com/replayctl/replayctl/internal/connector/prodigy"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

// Source is what Open returns: a whole connector.Connector, whose parts
// a system lacks answer connector.ErrUnsupported; by the system it also
// writes back (MarkReplayed/MarkResolved).
type Source = connector.Connector

const kindsHint = "use --source KIND:PATH with KIND one of cordum, cordum-redis, prodigy, nexora, jsonl, rabbitmq, kafka, sqs " +
	"(for example cordum:testdata/cordum/dlq.jsonl or prodigy:~/.prodigy/dlq/REPO)"

// Open turns a --source flag value "KIND:PATH" into the connector that reads it. Errors are usage
// errors with a hint listing the kinds (cordum, cordum-redis, prodigy, nexora,
// jsonl, rabbitmq, kafka, sqs). It checks a file path exists; cordum-redis
// takes a redis:// URL; a broker's error shows its spec without the
// password.
func Open(spec string) (Source, error) {
	usage := func(err error, hint string) (Source, error) {
		return nil, &connector.UsageError{Spec: spec, Err: err, Hint: hint}
	}
	kind, path, ok := strings.Cut(spec, ":")
	if !ok || kind == "" {
		return usage(errors.New("want KIND:PATH"), kindsHint)
	}
	if b, ok, err := openBroker(kind, spec, os.Getenv); ok {
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	if (kind == entry.KindCordum || kind == entry.KindNexora) &&
		(strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://")) {
		s, err := openLive(spec, kind, path, os.Getenv)
		if err != nil {
			return usage(err, "use "+kind+":http(s)://HOST:PORT")
		}
		return s, nil
	}
	switch kind {
	case entry.KindCordum, entry.KindNexora, entry.KindJSONL, entry.KindProdigy:
	case entry.KindCordumRedis:
		if !cordum.IsRedisURL(path) {
			return usage(fmt.Errorf("%q is not a redis:// URL", path), "use cordum-redis:redis://HOST:PORT/DB")
		}
		return cordum.NewRedis(spec, path)
	default:
		return usage(fmt.Errorf("unknown source kind %q", kind), kindsHint)
	}
	if path == "" {
		return usage(errors.New("missing path after "+kind+":"), kindsHint)
	}
	// The shell does not expand ~ after "prodigy:", so do it here.
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, rest)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return usage(err, "check the path")
	}
	if kind == entry.KindProdigy {
		if !fi.IsDir() {
			return usage(fmt.Errorf("%s is not a directory", path),
				"give a directory at or above Prodigy items/ folders, such as ~/.prodigy/dlq/REPO")
		}
		return prodigy.Open(spec, path), nil
	}
	if fi.IsDir() {
		return usage(fmt.Errorf("%s is a directory", path), "a "+kind+" source is one file")
	}
	if !fi.Mode().IsRegular() {
		return usage(fmt.Errorf("%s: %w (%s)", path, records.ErrNotRegular, records.DescribeMode(fi.Mode())),
			"a "+kind+" source is a regular file; copy a pipe's output to a file first")
	}
	switch kind {
	case entry.KindJSONL:
		return jsonl.Open(spec, path), nil
	case entry.KindNexora:
		return nexora.OpenFile(spec, path), nil
	}
	return cordum.OpenFile(spec, path), nil
}

// openLive is the live source of a running Cordum or Nexora.
func openLive(spec, kind, base string, getenv func(string) string) (Source, error) {
	if kind == entry.KindCordum {
		return cordum.NewLive(spec, base, getenv)
	}
	return nexora.NewLive(spec, base, getenv)
}
