package jsonl

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

func td(parts ...string) string { return connectortest.TD(parts...) }

// readAll reads a "jsonl:FILE" file.
func readAll(t *testing.T, spec string) []entry.Entry {
	t.Helper()
	return connectortest.ReadAll(t, &records.File{Spec: spec, Path: strings.TrimPrefix(spec, "jsonl:"), Format: Format()})
}

func ids(es []entry.Entry) []string                    { return connectortest.IDs(es) }
func itoa(i int) string                                { return strconv.Itoa(i) }
func writeFile(t *testing.T, name, data string) string { return connectortest.WriteFile(t, name, data) }

func mustRead(t *testing.T, path string) string { return connectortest.MustRead(t, path) }

func byID(t *testing.T, es []entry.Entry) map[string]entry.Entry { return connectortest.ByID(t, es) }

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}
