package source

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
	"github.com/replayctl/replayctl/internal/entry"
)

func ids(es []entry.Entry) []string             { return connectortest.IDs(es) }
func itoa(i int) string                         { return strconv.Itoa(i) }
func mustRead(t *testing.T, path string) string { return connectortest.MustRead(t, path) }
func write(t *testing.T, path, data string)     { connectortest.Write(t, path, data) }

// copyProdigy copies the sample Prodigy DLQ to a temporary directory.
func copyProdigy(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(td("prodigy"))); err != nil {
		t.Fatal(err)
	}
	return root
}

const prodigyJobID = "mapreduce-1700000000"

func prodigyItems(root string) string {
	return filepath.Join(root, "myrepo", prodigyJobID, "mapreduce", "dlq", prodigyJobID, "items")
}
