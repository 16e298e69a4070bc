package vetbad

import (
	"fmt"
	"testing"
)

// TestPrintfMisuse passes, but go vet's printf check (which go test runs
// by default) refuses the wrong verb.
func TestPrintfMisuse(t *testing.T) {
	_ = fmt.Sprintf("%d", "not a number")
}
