package check

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestSaturation(t *testing.T) {
	if got := AddSat(time.Second, 2*time.Second); got != 3*time.Second {
		t.Errorf("AddSat(1s, 2s) = %v", got)
	}
	if got := AddSat(math.MaxInt64-1, 2); got != math.MaxInt64 {
		t.Errorf("AddSat near the top = %v; want the largest duration", got)
	}
	if got := MulSat(time.Second, 3); got != 3*time.Second {
		t.Errorf("MulSat(1s, 3) = %v", got)
	}
	if got := MulSat(time.Hour, math.MaxInt32*4); got != math.MaxInt64 {
		t.Errorf("MulSat overflowing = %v; want the largest duration", got)
	}
}

func TestInvalid(t *testing.T) {
	sentinel := errors.New("pkg: invalid options")
	p, err := Invalid[*int](sentinel)("Limit is %d; want ≥ 1", -1)
	if p != nil || !errors.Is(err, sentinel) || err.Error() != "pkg: invalid options: Limit is -1; want ≥ 1" {
		t.Errorf("Invalid = %v, %v", p, err)
	}
}
