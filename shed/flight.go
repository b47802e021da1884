package shed

// An admission writes two counts: the work in flight, and the work ever admitted.
// Both live in one word, Shedder.slots, so that it writes them with one
// compare-and-swap. Two cores admitting at once then pass one cache line back and
// forth with two writes a request (take, release), as any exact concurrency limit
// must, not three. The low 32 bits are the work in flight; the high 32 bits are the
// work admitted, modulo 2^32. [Shedder.admittedNow] widens the latter to 64 bits.
const (
	admitOne   = 1<<32 + 1  // one more in flight, one more admitted
	releaseOne = ^uint64(0) // one fewer in flight: adds −1
	// foldEvery admissions, the one that reaches a multiple folds the count into
	// admittedAt. A reading then never lags 2^32 admissions behind.
	foldEvery = 1 << 30
)

// inflightOf returns the work in flight that a value of slots holds.
func inflightOf(w uint64) int64 { return int64(int32(uint32(w))) }

// inFlight returns the work in flight.
func (s *Shedder) inFlight() int64 { return inflightOf(s.slots.Load()) }

// take admits one more if fewer than room are in flight. It returns the work in
// flight with it, and whether it was admitted.
func (s *Shedder) take(room int64) (int64, bool) {
	for {
		w := s.slots.Load()
		n := inflightOf(w)
		if n >= room {
			return n, false
		}
		if s.slots.CompareAndSwap(w, w+admitOne) {
			if (w+admitOne)>>32%foldEvery == 0 {
				s.foldAdmitted()
			}
			return n + 1, true
		}
	}
}

// giveBack gives a slot back.
func (s *Shedder) giveBack() { s.slots.Add(releaseOne) }

// admittedBase is an exact count of the work admitted, and the high 32 bits of slots
// it was read with.
type admittedBase struct {
	total uint64
	high  uint32
}

// admittedNow returns the work admitted since the shedder was built.
func (s *Shedder) admittedNow() uint64 {
	b := s.admittedAt.Load() // stored before the slots read below: high never runs ahead
	cur := uint32(s.slots.Load() >> 32)
	if b == nil {
		return uint64(cur)
	}
	return b.total + uint64(cur-b.high)
}

// foldAdmitted brings admittedAt up to date.
func (s *Shedder) foldAdmitted() {
	for {
		b := s.admittedAt.Load()
		cur := uint32(s.slots.Load() >> 32)
		next := &admittedBase{total: uint64(cur), high: cur}
		if b != nil {
			next.total = b.total + uint64(cur-b.high)
		}
		if s.admittedAt.CompareAndSwap(b, next) {
			return
		}
	}
}
