// Package stripe picks the stripe of a striped counter that a goroutine writes.
// Package metrics' call counters and coalesce's hit counter use it.
//
// A stripe drawn at random for every write spreads each core's writes over every
// stripe: two cores then pass the counter's cache lines back and forth about every
// other write. A goroutine that keeps to one stripe keeps its lines in its core's
// cache, and goroutines running at the same time mostly write different stripes.
package stripe

import "unsafe"

// Index returns the stripe, in [0, mask], of the calling goroutine; mask is a power
// of two less one. It hashes the address of the goroutine's stack, as otter's
// buffers do (xruntime.StackHash): it costs no shared state, stays the same while
// the goroutine runs, and differs between goroutines running at once. A stack that
// grows is copied elsewhere, which only moves its goroutine to another stripe. Two
// goroutines may share a stripe: it is a hint, and counts stay exact.
func Index(mask uint32) uint32 {
	var x byte
	return hash(uintptr(unsafe.Pointer(&x))) & mask
}

// hash mixes a stack address into 32 bits. The bits below the smallest stack
// (2 KiB) depend on the call depth, not on the goroutine, so they are dropped.
// Stacks are aligned to their size, so neighbours may differ only in high bits; a
// multiplicative hash brings those down.
func hash(addr uintptr) uint32 {
	return uint32((uint64(addr>>11) * 0x9E3779B97F4A7C15) >> 32)
}
