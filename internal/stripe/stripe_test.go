package stripe

import "testing"

func TestIndex_WithinMask(t *testing.T) {
	for _, mask := range []uint32{0, 1, 7, 31} {
		for range 100 {
			if i := Index(mask); i > mask {
				t.Fatalf("Index(%d) = %d; want ≤ %d", mask, i, mask)
			}
		}
	}
}

// TestIndex_StableOnOneGoroutine: a goroutine keeps its stripe from call to call.
func TestIndex_StableOnOneGoroutine(t *testing.T) {
	first := Index(31)
	for range 100 {
		if i := Index(31); i != first {
			t.Fatalf("Index(31) = %d after %d on the same goroutine; want the same", i, first)
		}
	}
}

// TestHash_SpreadsNeighbouringStacks: stacks 8 KiB apart, as goroutines' often are,
// land on many of 16 stripes.
func TestHash_SpreadsNeighbouringStacks(t *testing.T) {
	seen := map[uint32]bool{}
	for i := range 64 {
		seen[hash(0xc000100000+uintptr(i)*8192)&15] = true
	}
	if len(seen) < 12 {
		t.Errorf("64 neighbouring stacks fell on %d of 16 stripes; want at least 12", len(seen))
	}
}
