package pass

import "testing"

func TestOne(t *testing.T) {}

func TestSub(t *testing.T) {
	t.Run("a", func(t *testing.T) {})
	t.Run("b", func(t *testing.T) {})
}

func TestSkipped(t *testing.T) { t.Skip("not here") }
