package rabbitmq

import (
	"slices"
	"sync"
)

// ackEvery is how many stored messages make one ack (multiple=true) while
// the read is ahead of the store. An ack per message was one frame and one
// write to the socket each.
const ackEvery = 64

// acker acks the reader channel's deliveries once their entries are
// stored: with multiple=true up to the highest delivery tag before which
// every delivery is stored, so a message is never acked before its entry
// (and every entry read before it) is durably stored. A delivery never
// stored (the run stopped first, or its entry was quarantined) holds the
// batch back; the stored ones behind it are acked one by one once
// behind of them wait (half the prefetch: unacked messages count against
// it, and a full prefetch stops the deliveries).
type acker struct {
	mu      sync.Mutex
	ack     func(tag uint64, multiple bool) error // the reader channel's Ack
	pending []uint64                              // delivered, not acked, in delivery order
	stored  map[uint64]bool                       // in pending and stored
	upTo    uint64                                // every pending tag <= upTo is stored: not yet acked
	batched int                                   // how many tags upTo covers
	behind  int                                   // stored behind an unstored one: ack them alone
}

func newAcker(ack func(tag uint64, multiple bool) error, prefetch int) *acker {
	return &acker{ack: ack, stored: map[uint64]bool{}, behind: max(1, prefetch/2)}
}

// heldMsg is a delivery whose entry is not yet stored.
type heldMsg struct {
	a   *acker
	tag uint64
}

// delivered records a delivery the read yields (in delivery order).
func (a *acker) delivered(tag uint64) {
	a.mu.Lock()
	a.pending = append(a.pending, tag)
	a.mu.Unlock()
}

// done says these deliveries' entry is stored; it acks what that allows.
func (a *acker) done(tags []uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range tags {
		a.stored[t] = true
	}
	for len(a.pending) > 0 && a.stored[a.pending[0]] {
		a.upTo = a.pending[0]
		delete(a.stored, a.upTo)
		a.pending = a.pending[1:]
		a.batched++
	}
	if a.batched > 0 && (a.batched >= ackEvery || len(a.pending) == 0) {
		if err := a.ack(a.upTo, true); err != nil {
			return err
		}
		a.batched = 0
	}
	if len(a.stored) >= a.behind {
		return a.ackBehindGap()
	}
	return nil
}

// flush acks every stored delivery not acked yet.
func (a *acker) flush() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.batched > 0 {
		if err := a.ack(a.upTo, true); err != nil {
			return err
		}
		a.batched = 0
	}
	return a.ackBehindGap()
}

// ackBehindGap acks, one by one, the stored deliveries that an unstored
// one before them holds back. a.mu is held.
func (a *acker) ackBehindGap() error {
	if a.batched > 0 {
		// upTo is never a tag acked alone (those leave pending first),
		// so this ack is never a second one: RabbitMQ closes the channel
		// on an unknown delivery tag, multiple or not.
		if err := a.ack(a.upTo, true); err != nil {
			return err
		}
		a.batched = 0
	}
	var err error
	a.pending = slices.DeleteFunc(a.pending, func(t uint64) bool {
		if !a.stored[t] || err != nil {
			return false
		}
		if err = a.ack(t, false); err != nil {
			return false
		}
		delete(a.stored, t)
		return true
	})
	return err
}
