// Package registry lists replayctl's connectors: it turns a --source
// value into the connector that reads it (Open), and finds a stored
// entry's connector again (ForEntry). It is the one place outside a
// connector's own package that names the systems.
package registry

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/connector/kafka"
	"github.com/replayctl/replayctl/internal/connector/nexora"
	"github.com/replayctl/replayctl/internal/connector/prodigy"
	"github.com/replayctl/replayctl/internal/connector/rabbitmq"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/connector/sqs"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/gen"
)

// Kinds are the source kinds, in the order --source's help lists them.
func Kinds() []string {
	return []string{cordum.Kind, cordum.KindRedis, prodigy.Kind, nexora.Kind, jsonl.Kind, rabbitmq.Kind, kafka.Kind, sqs.Kind}
}

// FileKinds are the kinds whose source is one file of records.
func FileKinds() []string { return []string{cordum.Kind, nexora.Kind, jsonl.Kind} }

// NativeKinds are the systems with a replay path of their own: the KIND
// of --target KIND:URL, and a rules.yaml target's key (see NativeTarget).
func NativeKinds() []string { return []string{cordum.Kind, nexora.Kind} }

// ErrOutsideRoot is wrapped when a write-back is asked for an item file
// outside its source directory.
var ErrOutsideRoot = prodigy.ErrOutsideRoot

// Source is what Open returns: a whole connector.Connector, whose parts
// a system lacks answer connector.ErrUnsupported; its Settle is the
// write-back (connector.SettlerOf).
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
	if (kind == cordum.Kind || kind == nexora.Kind) &&
		(strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://")) {
		s, err := openLive(spec, kind, path, os.Getenv)
		if err != nil {
			return usage(err, "use "+kind+":http(s)://HOST:PORT")
		}
		return s, nil
	}
	switch kind {
	case cordum.Kind, nexora.Kind, jsonl.Kind, prodigy.Kind:
	case cordum.KindRedis:
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
	if kind == prodigy.Kind {
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
	case jsonl.Kind:
		return jsonl.Open(spec, path), nil
	case nexora.Kind:
		return nexora.OpenFile(spec, path), nil
	}
	return cordum.OpenFile(spec, path), nil
}

// openLive is the live source of a running Cordum or Nexora.
func openLive(spec, kind, base string, getenv func(string) string) (Source, error) {
	if kind == cordum.Kind {
		return cordum.NewLive(spec, base, getenv)
	}
	return nexora.NewLive(spec, base, getenv)
}

// GenFormats are the formats internal/gen writes generated DLQs in, one
// per system that has a file or directory format.
func GenFormats() []gen.Format {
	return []gen.Format{jsonl.GenFormat(), cordum.GenFormat(), nexora.GenFormat(), prodigy.GenFormat()}
}

// GenFormat is the generator's format of a source kind.
func GenFormat(kind string) (gen.Format, error) {
	var kinds []string
	for _, f := range GenFormats() {
		if f.Kind == kind {
			return f, nil
		}
		kinds = append(kinds, f.Kind)
	}
	return gen.Format{}, fmt.Errorf("unknown format %q (want %s)", kind, strings.Join(kinds, ", "))
}

// Codes lists the reason codes every connector writes, sorted by code,
// class and place so that the taxonomy built from them never depends on
// the order connectors are listed in. A JSONL export writes whatever its
// producer wrote: it lists none. internal/policy merges them into the
// triage taxonomy (triage names no system and imports no connector).
func Codes() []connector.Code {
	var all []connector.Code
	for _, cs := range [][]connector.Code{
		cordum.Codes(),
		nexora.Codes(),
		prodigy.Codes(),
		(*rabbitmq.Conn)(nil).Codes(),
		(*kafka.Conn)(nil).Codes(),
		(*sqs.Conn)(nil).Codes(),
	} {
		all = append(all, cs...)
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		if a.Class != b.Class {
			return a.Class < b.Class
		}
		return a.Where < b.Where
	})
	return all
}

// SourceRef names a decodable entry as its system does, for the console;
// ok is false for a system that has no names of its own (a JSONL export,
// a broker: the console shows where the entry was read from).
func SourceRef(e *entry.Entry) (ref connector.SourceRef, ok bool) {
	switch e.Source {
	case cordum.Kind, cordum.KindRedis:
		return cordum.SourceRef(e), true
	case nexora.Kind:
		return nexora.SourceRef(e), true
	case prodigy.Kind:
		return prodigy.SourceRef(e), true
	}
	return connector.SourceRef{}, false
}

// ReplayContext names an entry for a program that replays it (an exec
// target, connector/webhook): its ref, source, scope and origin, and what
// its system adds (a Prodigy item's job id, repository and item file).
// Keys with no value are left out.
func ReplayContext(e *entry.Entry) map[string]string {
	out := map[string]string{"entry_ref": e.Ref(), "source": e.Source}
	set := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	set("scope", e.Scope)
	set("origin", e.Origin)
	if e.Source == prodigy.Kind {
		maps.Copy(out, prodigy.ReplayContext(e))
	}
	return out
}

// NativeTarget builds the replay path a --target or rules.yaml value
// names: "cordum:URL" (Cordum's retry) or "nexora:URL" (Nexora's replay).
// ok is false for any other kind (a plain URL is the webhook connector's).
func NativeTarget(spec string, timeout time.Duration, c Credentials) (n Native, ok bool, err error) {
	kind, base, _ := strings.Cut(spec, ":")
	switch kind {
	case cordum.Kind:
		n, err = cordum.NewTarget(base, timeout, c.CordumAPIKey, c.CordumTenantID)
	case nexora.Kind:
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
	if e.Source != cordum.Kind && e.Source != nexora.Kind {
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
		if kind == cordum.Kind {
			s, err = cordum.NewLive(spec, base, c.getenv)
		} else {
			s, err = nexora.NewLive(spec, base, c.getenv)
		}
		return s, err == nil
	}
	if e.Source == prodigy.Kind && !e.Undecodable() && e.Origin != "" {
		// ITEM.json in JOB/items/: the job directory is the narrowest root
		// that still holds the item, and Settle checks it is inside.
		job := filepath.Dir(filepath.Dir(e.Origin))
		return prodigy.Open(prodigy.Kind+":"+job, job), true
	}
	return nil, false
}
