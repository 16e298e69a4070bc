package prodigy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/connectortest"
)

func TestConformance(t *testing.T) {
	t.Run("settle idempotent", func(t *testing.T) {
		root := copyProdigy(t)
		src := Open("prodigy:"+root, root)
		e := readAll(t, "prodigy:"+root)[1]
		connectortest.SettleIdempotent(t, src, &e, func() bool {
			_, err := os.Stat(e.Origin)
			return err == nil
		})
	})
	t.Run("undecodable", func(t *testing.T) {
		root := t.TempDir()
		items := filepath.Join(root, "job", "items")
		connectortest.Mkdir(t, items)
		connectortest.Write(t, filepath.Join(items, "a.json"), `{"item_id":"a","item_data":{}}`)
		connectortest.Write(t, filepath.Join(items, "b.json"), `{"item_id":`)
		connectortest.Write(t, filepath.Join(items, "c.json"), `{"item_id":"c","item_data":{}}`)
		connectortest.UndecodableStillYielded(t, Open("prodigy:"+root, root), 2)
	})
}
