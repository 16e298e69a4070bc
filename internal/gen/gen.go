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

// Formats the generator writes.
var Formats = []string{"jsonl", "cordum", "nexora", "prodigy"}

// Write writes a corpus in format to path (a file; a directory for
// prodigy) and returns the --source value that reads it.
func Write(format, path string, o Options) (string, error) {
	if format == "prodigy" {
		return writeProdigy(path, o)
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = writeStream(format, w, o)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return format + ":" + path, err
}

func writeStream(format string, w io.Writer, o Options) error {
	first := true
	if format == "nexora" {
		io.WriteString(w, `{"items":[`+"\n")
	}
	err := Each(o, func(r Record) error {
		var line []byte
		switch {
		case r.Malformed:
			line = []byte(fmt.Sprintf(`{"id":%q,"topic":`, r.ID)) // truncated mid-record
			if format == "nexora" {
				line = []byte(fmt.Sprintf(`{"id":%q,"failureCode":17}`, r.ID)) // wrong type: arrays cannot resync
			}
		case format == "jsonl":
			line, _ = json.Marshal(map[string]any{"id": r.ID, "topic": r.Topic, "reason_code": r.Reason, "message": r.Message,
				"attempts": r.Attempts, "idempotency_key": r.Key, "labels": r.Labels, "payload": r.Payload})
		case format == "cordum":
			line, _ = json.Marshal(map[string]any{"job_id": r.ID, "topic": r.Topic, "status": "FAILED", "reason_code": r.Reason,
				"reason": r.Message, "attempts": r.Attempts, "idempotency_key": r.Key, "labels": r.Labels,
				"replay_status": "pending_review", "failed_at": r.Failed, "payload": r.Payload})
		case format == "nexora":
			line, _ = json.Marshal(map[string]any{"id": r.ID, "executionId": "exec-" + r.ID, "goal": r.Message,
				"context": json.RawMessage(r.Payload), "failureCode": strings.ToUpper(r.Reason), "failureMessage": r.Message,
				"failedAt": r.Failed, "reviewState": "PENDING"})
		default:
			return fmt.Errorf("unknown format %q (want %s)", format, strings.Join(Formats, ", "))
		}
		if format == "nexora" && !first {
			io.WriteString(w, ",\n")
		}
		first = false
		if _, err := w.Write(line); err != nil {
			return err
		}
		if format != "nexora" {
			_, err := io.WriteString(w, "\n")
			return err
		}
		return nil
	})
	if err == nil && format == "nexora" {
		_, err = io.WriteString(w, "\n],\"page\":0,\"size\":0}\n")
	}
	return err
}

func writeProdigy(root string, o Options) (string, error) {
	items := filepath.Join(root, "bench", "mapreduce-1", "mapreduce", "dlq", "mapreduce-1", "items")
	if err := os.MkdirAll(items, 0o755); err != nil {
		return "", err
	}
	types := []any{"Timeout", map[string]any{"CommandFailed": map[string]any{"exit_code": 101}}, "ValidationFailed", "MergeConflict", "PermissionError", "Unknown"}
	i := 0
	err := Each(o, func(r Record) error {
		var data []byte
		if r.Malformed {
			data = []byte(`{"item_id": "` + r.ID)
		} else {
			data, _ = json.Marshal(map[string]any{"item_id": r.ID, "item_data": r.Payload, "first_attempt": r.Failed, "last_attempt": r.Failed,
				"failure_count": r.Attempts, "failure_history": []any{map[string]any{"attempt_number": 1, "timestamp": r.Failed,
					"error_type": types[i%len(types)], "error_message": r.Message}}, "error_signature": r.Reason,
				"reprocess_eligible": true, "manual_review_required": false})
		}
		i++
		return os.WriteFile(filepath.Join(items, r.ID+".json"), data, 0o644)
	})
	return "prodigy:" + root, err
}
