package triage

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/group"
)

// A held group's entries wait for a person, whatever the rules propose;
// other groups and committed keys are untouched.
func TestHeldGroupWaits(t *testing.T) {
	g := newEngine(t, "version: v1\ndlq_rules:\n  - action: auto_replay\n", nil)
	held := &entry.Entry{ID: "1", Source: "jsonl", Topic: "payments", ReasonCode: "timeout", Message: "upstream timed out after 30s", IdempotencyKey: "k1"}
	other := &entry.Entry{ID: "2", Source: "jsonl", Topic: "orders", ReasonCode: "timeout", Message: "upstream timed out after 30s", IdempotencyKey: "k2"}
	d := g.Decide(context.Background(), held, LedgerView{})
	if d.Action != AutoReplay {
		t.Fatalf("without a hold: %s", d.Action)
	}
	id := group.Of(held, string(d.Class)).ID()
	hg := g.WithHolds(Holds{id: {Group: id, Reason: "payments fix", Until: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), By: "alice"}})
	d = hg.Decide(context.Background(), held, LedgerView{})
	if d.Action != ManualReview || d.GroupHold == nil || d.GroupHold.Group != id || !strings.Contains(strings.Join(d.Reasons, ";"), "payments fix") {
		t.Errorf("held: %s %+v %v", d.Action, d.GroupHold, d.Reasons)
	}
	if d := hg.Decide(context.Background(), other, LedgerView{}); d.Action != AutoReplay || d.GroupHold != nil {
		t.Errorf("another group: %s %+v", d.Action, d.GroupHold)
	}
	if d := hg.Decide(context.Background(), held, LedgerView{State: StateSucceeded}); d.Action != Skip {
		t.Errorf("committed key in a held group: %s", d.Action)
	}
	if g.Holds != nil {
		t.Error("WithHolds changed the engine it copied")
	}
}

func TestGroupsSectionIsValidated(t *testing.T) {
	_, err := ParseRules("rules.yaml", []byte("version: v1\ngroups:\n  stack_frames: 50\n"))
	if err == nil || !strings.Contains(err.Error(), "rules.yaml:3") || !strings.Contains(err.Error(), "groups.stack_frames must be from -1") {
		t.Errorf("stack_frames 50: %v", err)
	}
	if _, err := ParseRules("rules.yaml", []byte("version: v1\ngroups:\n  by: topic\n")); err == nil {
		t.Error("an unknown key in groups was accepted")
	}
	r, err := ParseRules("rules.yaml", []byte("version: v1\ngroups:\n  stack_frames: 0\n  ignore_topic: true\n"))
	if err != nil || !r.CustomGroups() || r.GroupOptions().StackFrames != -1 {
		t.Errorf("%+v %v", r.GroupOptions(), err)
	}
}
