package nexora

import (
	"strconv"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
)

func td(parts ...string) string { return connectortest.TD(parts...) }

// readAll reads a "nexora:FILE" file.
func readAll(t *testing.T, spec string) []entry.Entry {
	t.Helper()
	return connectortest.ReadAll(t, &records.File{Spec: spec, Path: strings.TrimPrefix(spec, "nexora:"), Format: Format()})
}

func ids(es []entry.Entry) []string                    { return connectortest.IDs(es) }
func itoa(i int) string                                { return strconv.Itoa(i) }
func writeFile(t *testing.T, name, data string) string { return connectortest.WriteFile(t, name, data) }

func mustRead(t *testing.T, path string) string { return connectortest.MustRead(t, path) }

func byID(t *testing.T, es []entry.Entry) map[string]entry.Entry { return connectortest.ByID(t, es) }
