package policygrpc

import (
	"strconv"
	"testing"
	"time"
)

// FuzzParsePushback: any trailer value is a delay ≥ 0 or −1 (do not retry), never a
// panic; a plain decimal of milliseconds that fits is read exactly (gRFC A6).
func FuzzParsePushback(f *testing.F) {
	for _, s := range []string{"0", "1500", "-1", "soon", "1.5", " 20 ", "", "+5", "18446744073709551616", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := parsePushback(s)
		if d < 0 && d != -1 {
			t.Fatalf("parsePushback(%q) = %v; want ≥ 0 or −1", s, d)
		}
		if ms, err := strconv.ParseUint(s, 10, 64); err == nil && ms < 1<<40 {
			if d != time.Duration(ms)*time.Millisecond {
				t.Fatalf("parsePushback(%q) = %v; want %d ms", s, d, ms)
			}
		}
	})
}
