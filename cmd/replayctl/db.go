package main

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// openLedgerReadOnly opens the ledger for reading if the file exists; with
// no file every key is new. It never creates or changes the file.
func openLedgerReadOnly(path, dsn string) (store.Backend, func(), error) {
	if dsn != "" {
		f := dbFlags{dsn: dsn}
		s, err := f.openExisting()
		if err != nil {
			return nil, nil, err
		}
		return s, func() { s.Close() }, nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, func() {}, nil
	}
	s, err := bolt.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	return s, func() { s.Close() }, nil
}

// storedRef is st's answer to whether it holds an entry under a ref
// (source.KeepStoredNames).
func storedRef(st store.Store) connector.StoredRef {
	return func(ctx context.Context, ref string) (bool, error) {
		var has bool
		err := st.View(ctx, func(tx store.Tx) error {
			er, err := tx.Entry(ref)
			has = er != nil
			return err
		})
		return has, err
	}
}
