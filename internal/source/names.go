package source

import (
	"github.com/replayctl/replayctl/internal/connector"
)

// KeepStoredNames hands stored, the store's lookup, to every source that
// names some entries otherwise than an earlier replayctl did
// (connector.NameKeeper): an entry the store already holds under its
// earlier name is yielded under that name, so the stored record stays the
// one entry (no duplicate, its quarantine and shown id kept). stored nil:
// a run without a store, where names are new.
func KeepStoredNames(srcs []Source, stored connector.StoredRef) {
	if stored == nil {
		return
	}
	for _, s := range srcs {
		if k, ok := s.(connector.NameKeeper); ok {
			k.KeepStoredNames(stored)
		}
	}
}
