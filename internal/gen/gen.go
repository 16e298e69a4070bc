// Package gen writes realistic dead-letter queues of any size, in every
// source format replayctl reads, deterministic from a seed: a mix of
// classes, topics and labels, payloads of 0.5 to 4 KB, and about 0.5%
// malformed records. It streams (a million entries never sit in memory)
// and is used by the benchmarks and for trying replayctl out.
package gen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Options describe a corpus.
type Options struct {
	N         int     // entries
	Seed      uint64  // same seed, same bytes
	Malformed float64 // share of malformed records (default 0.005)
	// MinPayload/MaxPayload bound payload sizes in bytes (defaults 512, 4096).
	MinPayload, MaxPayload int
	// AutoOnly makes every entry a plain transient failure that the
	// bundled rules replay automatically (replay benchmarks).
	AutoOnly bool
}

func (o *Options) defaults() {
	if o.Malformed == 0 {
		o.Malformed = 0.005
	}
	if o.MinPayload <= 0 {
		o.MinPayload = 512
	}
	if o.MaxPayload < o.MinPayload {
		o.MaxPayload = 4096
	}
}

// Record is one generated entry, format-neutral.
type Record struct {
	ID, Topic, Reason, Message, Key string
	Attempts                        int
	Labels                          map[string]string
	Payload                         json.RawMessage
	Failed                          time.Time
	Malformed                       bool
}

var (
	reasons = []struct{ code, msg string }{
		{"timeout", "upstream timed out after 30s"}, {"dependency_unavailable", "jira api returned 503 service unavailable"},
		{"rate_limited", "429 too many requests"}, {"max_scheduling_retries", "max scheduling retries exceeded (attempts=50)"},
		{"no_workers", "no workers available for pool default"}, {"schema_invalid", "payload does not match schema v3"},
		{"parse_error", "cannot parse tool response"}, {"denied", "policy denied: amount exceeds limit"},
		{"approval_required", "external recipient needs approval"}, {"partial_external_write", "charge created, ledger write failed"},
		{"unknown_commit_state", "commit state unknown after network split"}, {"", "connection refused by upstream"},
		{"weird_new_code", "something odd happened"},
	}
	topics = []string{"tool.github.pr.create", "tool.email.send", "tool.jira.ticket.create", "tool.slack.post",
		"payments.charge.create", "tool.calendar.invite", "data.export.run"}
	words = strings.Fields("replay controller dead letter queue idempotent safe audit policy approval ledger worker target payload retry")
)

// Each calls fn with every record, in order, from the seed.
func Each(o Options, fn func(Record) error) error {
	o.defaults()
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var sb strings.Builder
	for i := range o.N {
		r := Record{ID: fmt.Sprintf("job_%08d", i), Attempts: 1 + rng.IntN(50), Failed: base.Add(time.Duration(i) * time.Second)}
		if o.AutoOnly {
			// Few attempts: the bundled rules send flapping failures (20+
			// attempts) to approval.
			r.Reason, r.Message, r.Topic, r.Attempts = "timeout", "upstream timed out after 30s", "tool.email.send", 3
		} else {
			rs := reasons[rng.IntN(len(reasons))]
			r.Reason, r.Message, r.Topic = rs.code, rs.msg, topics[rng.IntN(len(topics))]
			if rng.IntN(20) == 0 {
				r.Labels = map[string]string{"risk": "high"}
			} else if rng.IntN(3) == 0 {
				r.Labels = map[string]string{"team": "platform"}
			}
			r.Malformed = rng.Float64() < o.Malformed
		}
		r.Key = fmt.Sprintf("run_%08d:step_%d", i, rng.IntN(5))
		size := o.MinPayload + rng.IntN(o.MaxPayload-o.MinPayload+1)
		sb.Reset()
		for sb.Len() < size {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		body, _ := json.Marshal(map[string]any{"job": r.ID, "topic": r.Topic, "text": sb.String()})
		r.Payload = body
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// Format is how one system writes its DLQ, given by the system's
// connector (connector/registry lists them): a file of records (Line
// encodes one record, a malformed one broken as that system's would be;
// Head, Sep and Tail go around and between them) or, where ItemsDir is
// set, a directory of item files (Item names and encodes one).
type Format struct {
	Kind string
	// Items is how a benchmark names its records ("Prodigy items").
	Items           string
	Head, Sep, Tail string
	Line            func(r Record) []byte
	// ItemsDir is where under the root the item files go; Item is the
	// i-th record's file name and bytes.
	ItemsDir string
	Item     func(i int, r Record) (name string, data []byte)
}

// LinesFormat is a format of one JSON object a line (a JSON Lines export, a
// dump of a system's records): fields gives a record's object; a
// malformed record is cut off mid-record.
func LinesFormat(kind, items string, fields func(Record) map[string]any) Format {
	return Format{Kind: kind, Items: items, Line: func(r Record) []byte {
		if r.Malformed {
			return []byte(fmt.Sprintf(`{"id":%q,"topic":`+"\n", r.ID))
		}
		line, _ := json.Marshal(fields(r))
		return append(line, '\n')
	}}
}

// Write writes a corpus in format f to path (a file; a directory for a
// format of item files) and returns the --source value that reads it.
func Write(f Format, path string, o Options) (string, error) {
	if f.ItemsDir != "" {
		return writeItems(f, path, o)
	}
	file, err := os.Create(path)
	if err != nil {
		return "", err
	}
	w := bufio.NewWriterSize(file, 1<<20)
	err = writeStream(f, w, o)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	return f.Kind + ":" + path, err
}

func writeStream(f Format, w io.Writer, o Options) error {
	if _, err := io.WriteString(w, f.Head); err != nil {
		return err
	}
	first := true
	err := Each(o, func(r Record) error {
		if !first {
			if _, err := io.WriteString(w, f.Sep); err != nil {
				return err
			}
		}
		first = false
		_, err := w.Write(f.Line(r))
		return err
	})
	if err == nil {
		_, err = io.WriteString(w, f.Tail)
	}
	return err
}

func writeItems(f Format, root string, o Options) (string, error) {
	items := filepath.Join(root, f.ItemsDir)
	if err := os.MkdirAll(items, 0o755); err != nil {
		return "", err
	}
	i := 0
	err := Each(o, func(r Record) error {
		name, data := f.Item(i, r)
		i++
		return os.WriteFile(filepath.Join(items, name), data, 0o644)
	})
	return f.Kind + ":" + root, err
}
