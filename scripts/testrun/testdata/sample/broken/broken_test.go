package broken

import "testing"

func TestNeverBuilds(t *testing.T) {
	var n int = "not a number"
	_ = n
}
