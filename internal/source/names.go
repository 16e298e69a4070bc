package source

import (
	"context"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/store"
)

// KeepStoredNames hands st to every source that names some entries
// otherwise than an earlier replayctl did (connector.NameKeeper): an entry
// st already holds under its earlier name is yielded under that name, so
// the stored record stays the one entry (no duplicate, its quarantine and
// shown id kept). st nil: a run without a store, where names are new.
func KeepStoredNames(srcs []Source, st store.Store) {
	if st == nil {
		return
	}
	stored := func(ctx context.Context, ref string) (bool, error) {
		var has bool
		err := st.View(ctx, func(tx store.Tx) error {
			er, err := tx.Entry(ref)
			has = er != nil
			return err
		})
		return has, err
	}
	for _, s := range srcs {
		if k, ok := s.(connector.NameKeeper); ok {
			k.KeepStoredNames(stored)
		}
	}
}
