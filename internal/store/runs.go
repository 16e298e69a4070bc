package store

import (
	"errors"
)

// Runs (bulk replays, reconciles) are kept as the JSON their owner, the
// runs package, writes, by id: the store never interprets them. They live
// beside the state they describe so that `runs list|show|cancel` work from
// another process (PostgreSQL, or the serving process of a bbolt file).

// ErrStop ends a Runs walk early without an error.
var ErrStop = errors.New("stop")
