package cordum

import (
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

func td(parts ...string) string { return connectortest.TD(parts...) }

// Parse opens "cordum-redis:URL" as the registry does.
func Parse(spec string) (*Redis, error) {
	return NewRedis(spec, strings.TrimPrefix(spec, "cordum-redis:"))
}

// readAll reads a "cordum:FILE" dump.
func readAll(t *testing.T, spec string) []entry.Entry {
	t.Helper()
	return connectortest.ReadAll(t, &records.File{Spec: spec, Path: strings.TrimPrefix(spec, "cordum:"), Format: Format()})
}

func byID(t *testing.T, es []entry.Entry) map[string]entry.Entry { return connectortest.ByID(t, es) }

func writeFile(t *testing.T, name, data string) string { return connectortest.WriteFile(t, name, data) }
