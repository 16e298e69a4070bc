package prodigy

import (
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
	"github.com/replayctl/replayctl/internal/entry"
)

func td(parts ...string) string { return connectortest.TD(parts...) }

// Parse opens "prodigy:DIR" as the registry does.
func Parse(spec string) (*Source, error) {
	return Open(spec, strings.TrimPrefix(spec, "prodigy:")), nil
}

func readAll(t *testing.T, spec string) []entry.Entry {
	t.Helper()
	src, _ := Parse(spec)
	return connectortest.ReadAll(t, src)
}

func ids(es []entry.Entry) []string             { return connectortest.IDs(es) }
func mustRead(t *testing.T, path string) string { return connectortest.MustRead(t, path) }

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}
