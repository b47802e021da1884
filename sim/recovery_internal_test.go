package sim

import (
	"testing"
	"time"
)

func TestRecoveryStrict(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	calls := func(spec string) []CallAt { // one call every 100 ms from 0: o answered, x not
		var cs []CallAt
		for i, c := range spec {
			cs = append(cs, CallAt{At: ms(100 * i), OK: c == 'o'})
		}
		return cs
	}
	for _, c := range []struct {
		spec string
		to   time.Duration
		want time.Duration
	}{
		{"xxxooooooooooooo", ms(200), ms(100)},   // from 300 ms on every call answered
		{"xxxooxoooooooooooo", ms(200), ms(400)}, // a failure at 500 ms: from 600 ms
		{"xxxoooooooooo", ms(200), -1},           // 300 ms + 1 s is 1.3 s, the last start is 1.2 s: none fits
		{"oooooooooooooooo", 0, 0},               // never failed
		{"xxxxxxxxxxxxxxxxx", ms(200), -1},       // never recovered
		{"", 0, -1},
	} {
		if got := RecoveryStrict(calls(c.spec), c.to, StrictWindow); got != c.want {
			t.Errorf("RecoveryStrict(%s, %v) = %v, want %v", c.spec, c.to, got, c.want)
		}
	}
}
