package store_test

import (
	"slices"
	"testing"

	"github.com/replayctl/replayctl/internal/store"
)

// The default listing (CLI, API, console) shows exactly the statuses the
// counters hold open, in display order; the list used to be written out
// twice beside IsOpen.
func TestOpenStatesAreWhatIsOpenHolds(t *testing.T) {
	want := []string{store.StatusPending, store.StatusAwaitingApproval, store.StatusRejected, store.StatusManualReview,
		store.StatusQuarantined, store.StatusReplaying, store.StatusFailed, store.StatusUnknown}
	if got := store.OpenStates(); !slices.Equal(got, want) {
		t.Fatalf("OpenStates() = %v, want %v", got, want)
	}
	for _, s := range store.Statuses {
		if store.IsOpen(s) != slices.Contains(store.OpenStates(), s) {
			t.Errorf("%s: IsOpen %v but OpenStates disagrees", s, store.IsOpen(s))
		}
	}
	store.OpenStates()[0] = "changed"
	if store.OpenStates()[0] != store.StatusPending {
		t.Fatal("OpenStates shares its slice: a caller's append or edit changes every listing")
	}
}
