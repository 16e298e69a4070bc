package replay

import (
	"context"
	"net/http"
	"testing"
)

// Issue 30: a bulk replay run ended "succeeded, replay: 21 done" when 0
// were delivered (7 scheduled for a retry, 14 held by an open breaker).
// Its delivery counts say what happened to each entry it set out to
// replay, and it is complete only when every one was delivered.
func TestBulkReplayDeliveryCountsWhatHappened(t *testing.T) {
	b, _ := outage(t)
	b.sink.status = func(string, int) int { return http.StatusServiceUnavailable }
	bk := b.bulk(0, 0)
	bk.Reconciler.Breakers = &Breakers{Failures: 2, Clock: b.clock}
	rep, err := bk.ExecuteReplay(context.Background(), BulkFilter{Classes: []string{"transient"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Delivery == nil {
		t.Fatal("an executed bulk replay reports no delivery")
	}
	// 45 planned: 2 sent and answered 503 (a retry is scheduled), 43 held
	// by the breaker those two answers opened.
	want := Delivery{Delivered: 0, Scheduled: 2, HeldByBreaker: 43}
	if *rep.Delivery != want || rep.Delivery.Complete() {
		t.Fatalf("delivery %+v (complete %v), want %+v, not complete", *rep.Delivery, rep.Delivery.Complete(), want)
	}
	if got := rep.Delivery.String(); got != "0 delivered, 2 scheduled for a retry, 43 held by an open breaker" {
		t.Errorf("summary %q", got)
	}

	// The target is back and the breaker's cool-down over: the same
	// operation delivers them all, and it is complete.
	b.sink.status = func(string, int) int { return http.StatusOK }
	b.clock.advance(DefaultBreakerCooldown + DefaultBreakerCooldown)
	rep, err = bk.ExecuteReplay(context.Background(), BulkFilter{Classes: []string{"transient"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Delivery == nil || !rep.Delivery.Complete() || rep.Delivery.Delivered == 0 {
		t.Fatalf("after the outage: %+v, want every planned entry delivered", rep.Delivery)
	}
}

func TestDeliveryOfSortsOutcomes(t *testing.T) {
	rep := &BulkReport{Op: "replay", Replays: map[string]int{
		"succeeded": 3, "handled_elsewhere": 1, "retry": 2, "not_sent": 1, BulkTargetUnavailable: 4,
		"failed": 1, "outcome_unknown": 2, "manual_review": 5,
	}}
	got := DeliveryOf(rep)
	want := Delivery{Delivered: 4, Scheduled: 3, HeldByBreaker: 4, Failed: 3, Refused: 5}
	if got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
	if DeliveryOf(&BulkReport{Preview: true, Replays: map[string]int{"retry": 1}}) != (Delivery{}) {
		t.Error("a preview has a delivery")
	}
}
