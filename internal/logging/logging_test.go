package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestJSONLinesAtTheLevelAsked(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "run", "run-1")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want only the warning: %q", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not a JSON line: %v", err)
	}
	if rec["msg"] != "shown" || rec["run"] != "run-1" || rec["level"] != "WARN" {
		t.Fatalf("record = %v", rec)
	}
}

func TestUnknownValuesAreErrorsNamingTheChoices(t *testing.T) {
	if _, err := New(&bytes.Buffer{}, "yaml", "info"); err == nil || !strings.Contains(err.Error(), "text or json") {
		t.Fatalf("format yaml: %v", err)
	}
	if _, err := New(&bytes.Buffer{}, "text", "loud"); err == nil || !strings.Contains(err.Error(), "debug, info") {
		t.Fatalf("level loud: %v", err)
	}
	var buf bytes.Buffer
	log, err := New(&buf, "TEXT", "DEBUG")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("d")
	if !strings.Contains(buf.String(), "level=DEBUG msg=d") {
		t.Fatalf("text debug line: %q", buf.String())
	}
}
