package fail

import "testing"

func TestFine(t *testing.T) {}

func TestBroken(t *testing.T) {
	t.Log("the detail a failure needs")
	t.Error("boom")
}
