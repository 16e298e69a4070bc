package source

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/replayctl/replayctl/internal/entry"
)

// Source yields the entries of one DLQ, one at a time, in a deterministic order.
type Source interface {
	String() string // "kind:path" as given by the user
	// Entries yields every record. A record that cannot be decoded is still
	// yielded, as an entry with DecodeError set, ID naming where it was
	// ("file:line", "file#index" or the file path), Origin the same, Source the kind;
	// from a live source (a running system's pages or Redis) ID is the
	// record's own id, else a hash of its bytes, and Origin where it was.
	// A fatal error (cannot open/walk) is yielded once as (zero Entry, err) and iteration stops.
	Entries(ctx context.Context) iter.Seq2[entry.Entry, error]
}

// WriteBack is implemented by sources that can record at the source that an
// entry was replayed successfully (Prodigy: remove the item file, as `prodigy dlq retry` does).
type WriteBack interface {
	MarkReplayed(ctx context.Context, e entry.Entry) error
}

// Resolver is implemented by sources whose system records why an entry
// was resolved (Nexora: POST .../resolve {"reason"}); others take a
// resolve's write-back through WriteBack.
type Resolver interface {
	MarkResolved(ctx context.Context, e entry.Entry, reason string) error
}

// Sentinel errors.
var (
	// ErrOutsideRoot is wrapped by MarkReplayed's error when the entry's file
	// is not a Prodigy item inside the walked root: nothing is removed.
	ErrOutsideRoot = errors.New("not a Prodigy item file inside the source directory")
	// ErrNotRegular is wrapped when a source or Prodigy item is a named
	// pipe, device, socket or other non-regular file: reading one could block
	// forever or never end, so it is refused before any read.
	ErrNotRegular = errors.New("not a regular file")
)

const kindsHint = "use --source KIND:PATH with KIND one of cordum, cordum-redis, prodigy, nexora, jsonl, rabbitmq, kafka, sqs " +
	"(for example cordum:testdata/cordum/dlq.jsonl or prodigy:~/.prodigy/dlq/REPO)"

// UsageError is a --source value that cannot be used. Hint says what would.
type UsageError struct {
	Spec string // the value as given
	Err  error  // what is wrong with it
	Hint string // what to do instead
}

func (e *UsageError) Error() string {
	return fmt.Sprintf("--source %q: %v; %s", e.Spec, e.Err, e.Hint)
}

func (e *UsageError) Unwrap() error { return e.Err }

// Parse turns a --source flag value "KIND:PATH" into a Source. Errors are usage
// errors with a hint listing the kinds (cordum, cordum-redis, prodigy, nexora,
// jsonl). It checks a file path exists; cordum-redis takes a redis:// URL.
func Parse(spec string) (Source, error) {
	usage := func(err error, hint string) (Source, error) {
		return nil, &UsageError{Spec: spec, Err: err, Hint: hint}
	}
	kind, path, ok := strings.Cut(spec, ":")
	if !ok || kind == "" {
		return usage(errors.New("want KIND:PATH"), kindsHint)
	}
	if src, ok, err := openBroker(kind, spec); ok {
		if err != nil {
			return nil, &UsageError{Spec: redactSpec(spec), Err: err, Hint: brokerHints[kind]}
		}
		return src, nil
	}
	if (kind == entry.KindCordum || kind == entry.KindNexora) &&
		(strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://")) {
		s, err := newLiveSource(spec, kind, path, os.Getenv)
		if err != nil {
			return usage(err, "use "+kind+":http(s)://HOST:PORT")
		}
		return s, nil
	}
	var f format
	switch kind {
	case entry.KindCordum:
		f = cordumFormat()
	case entry.KindNexora:
		f = nexoraFormat()
	case entry.KindJSONL:
		f = jsonlFormat()
	case entry.KindProdigy:
	case entry.KindCordumRedis:
		if !isRedisURL(path) {
			return usage(fmt.Errorf("%q is not a redis:// URL", path), "use cordum-redis:redis://HOST:PORT/DB")
		}
		return newRedisSource(spec, path)
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
		return &prodigySource{spec: spec, root: path}, nil
	}
	if fi.IsDir() {
		return usage(fmt.Errorf("%s is a directory", path), "a "+kind+" source is one file")
	}
	if !fi.Mode().IsRegular() {
		return usage(fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, describeMode(fi.Mode())),
			"a "+kind+" source is a regular file; copy a pipe's output to a file first")
	}
	return &fileSource{spec: spec, path: path, format: f}, nil
}

// fileSource is a DLQ held in one JSON file (cordum, nexora, jsonl).
type fileSource struct {
	spec   string
	path   string
	format format
}

func (s *fileSource) String() string { return s.spec }

func (s *fileSource) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		f, err := openRegular(s.path, 0)
		if err != nil {
			yield(entry.Entry{}, fmt.Errorf("read %s source: %w", s.format.kind, err))
			return
		}
		defer f.Close()
		rr := recordReader{format: s.format, name: s.path, r: f, maxLine: maxRecord}
		rr.each(ctx, yield)
	}
}

// All reads srcs one after another, as one stream in their order. A fatal
// error of a source is yielded as "source SPEC: err" and ends the stream.
func All(srcs []Source) func(context.Context) iter.Seq2[entry.Entry, error] {
	return func(ctx context.Context) iter.Seq2[entry.Entry, error] {
		return func(yield func(entry.Entry, error) bool) {
			for _, src := range srcs {
				for e, err := range src.Entries(ctx) {
					if err != nil {
						yield(entry.Entry{}, fmt.Errorf("source %s: %w", src, err))
						return
					}
					if !yield(e, nil) {
						return
					}
				}
			}
		}
	}
}
