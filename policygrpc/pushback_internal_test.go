package policygrpc

import (
	"strconv"
	"testing"
	"time"
)

// FuzzParsePushback: any trailer value is a delay ≥ 0 or −1 (do not retry), never a
// panic; the value is a delay exactly when it is gRFC A6's "ASCII encoded signed
// 32-bit integer with no unnecessary leading zeros" and not negative.
func FuzzParsePushback(f *testing.F) {
	for _, s := range []string{"0", "1500", "-1", "soon", "1.5", " 20 ", "", "+5", "05", "2147483647", "2147483648", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := parsePushback(s)
		if d < 0 && d != -1 {
			t.Fatalf("parsePushback(%q) = %v; want ≥ 0 or −1", s, d)
		}
		ms, err := strconv.ParseInt(s, 10, 32)
		canonical := err == nil && ms >= 0 && strconv.FormatInt(ms, 10) == s
		switch {
		case canonical && d != time.Duration(ms)*time.Millisecond:
			t.Fatalf("parsePushback(%q) = %v; want %d ms", s, d, ms)
		case !canonical && d != -1:
			t.Fatalf("parsePushback(%q) = %v; want −1 (do not retry): not a non-negative A6 integer", s, d)
		}
	})
}

// TestParsePushback_A6 pins gRFC A6's form: a signed 32-bit integer without
// unnecessary leading zeros; a negative or unparsable one means do not retry.
func TestParsePushback_A6(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"0": 0, "1500": 1500 * time.Millisecond, "2147483647": 2147483647 * time.Millisecond,
		"-1": -1, "-2147483648": -1, "2147483648": -1, "05": -1, "00": -1, "+5": -1, " 5": -1, "5 ": -1,
		"1.5": -1, "": -1, "soon": -1, "-0": -1, "18446744073709551616": -1,
	} {
		if got := parsePushback(v); got != want {
			t.Errorf("parsePushback(%q) = %v; want %v", v, got, want)
		}
	}
}
