package callpath_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backstop-go/backstop/callpath"
)

var now = time.Date(1994, time.November, 6, 8, 49, 37, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		// delay-seconds
		{"0", 0, true},
		{"120", 120 * time.Second, true},
		{"  5\t", 5 * time.Second, true},                             // surrounding whitespace
		{"007", 7 * time.Second, true},                               // leading zeros are digits
		{"86400", 24 * time.Hour, true},                              // exactly the maximum
		{"86401", callpath.MaxRetryAfter, true},                      // saturates
		{"99999999999999999999999999", callpath.MaxRetryAfter, true}, // never overflows
		{"", 0, false},
		{"   ", 0, false},
		{"-1", 0, false},  // negative
		{"+1", 0, false},  // sign
		{"1.5", 0, false}, // fractional
		{"1e3", 0, false},
		{"12 s", 0, false},
		{"0x10", 0, false},
		{"soon", 0, false},
		// HTTP-date, all three forms of RFC 9110 §5.6.7, relative to now.
		{"Sun, 06 Nov 1994 08:51:37 GMT", 2 * time.Minute, true},  // IMF-fixdate
		{"Sunday, 06-Nov-94 08:51:37 GMT", 2 * time.Minute, true}, // RFC 850
		{"Sun Nov  6 08:51:37 1994", 2 * time.Minute, true},       // asctime
		{" Sun, 06 Nov 1994 08:49:38 GMT ", time.Second, true},    // whitespace
		{"Sun, 06 Nov 1994 08:49:37 GMT", 0, true},                // now
		{"Sat, 05 Nov 1994 08:49:37 GMT", 0, true},                // past: 0
		{"Sat, 06 Nov 2094 08:49:37 GMT", callpath.MaxRetryAfter, true},
		{"Sun, 06 Nov 1994 08:49:37 UTC", 0, false}, // HTTP-dates are GMT
		{"Sunday, 06-Nov-94 08:51:37 PST", 0, false},
		// RFC 850's two-digit year is the one within 50 years of now (1994): 30 is
		// 2030, 45 is 1945 — with the weekday of that year.
		{"Wednesday, 06-Nov-30 08:49:37 GMT", callpath.MaxRetryAfter, true},
		{"Thursday, 06-Nov-30 08:49:37 GMT", 0, false}, // 1930's weekday
		{"Tuesday, 06-Nov-45 08:49:37 GMT", 0, true},
		{"Monday, 06-Nov-45 08:49:37 GMT", 0, false}, // 2045's weekday
		{"Sun, 6 Nov 1994 08:49:37 GMT", 0, false},   // IMF-fixdate has 2-digit days
		{"Sun, 06 Nov 1994 8:49:37 GMT", 0, false},   //
		{"Sun, 31 Feb 1994 08:49:37 GMT", 0, false},  // no such day
		{"Mon, 06 Nov 1994 08:49:37 GMT", 0, false},  // wrong weekday
		{"2026-01-01T00:00:00Z", 0, false},           // RFC 3339 is not an HTTP-date
	}
	for _, tt := range tests {
		got, ok := callpath.ParseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseRetryAfter checks ParseRetryAfter against http.ParseTime, the standard
// library's reader of the same three date forms: a date one accepts, the other must
// read as the same instant (http.ParseTime also takes non-GMT zones in the RFC 850 form,
// which RFC 9110 forbids, so only our acceptances are checked both ways).
func FuzzParseRetryAfter(f *testing.F) {
	seeds := []string{
		"0", "120", " 5 ", "-1", "1.5", "", "99999999999999999999", // delay-seconds
		"Sun, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate
		"Sunday, 06-Nov-94 08:49:37 GMT", // RFC 850
		"Sun Nov  6 08:49:37 1994",       // asctime
		"Sun Nov 16 08:49:37 1994",       // asctime, 2-digit day
		"Mon, 06 Nov 1994 08:49:37 GMT",  // wrong weekday
		"Sun, 06 Nov 1994 08:49:37 UTC",  // wrong zone
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := callpath.ParseRetryAfter(s, now)
		if !ok {
			return
		}
		if d < 0 || d > callpath.MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v; out of [0, MaxRetryAfter]", s, d)
		}
		v := strings.Trim(s, " \t")
		if v[0] >= '0' && v[0] <= '9' {
			if strings.Trim(v, "0123456789") != "" {
				t.Fatalf("ParseRetryAfter(%q) accepted a non-digit delay", s)
			}
			return
		}
		when, err := http.ParseTime(v)
		if err != nil {
			t.Fatalf("ParseRetryAfter(%q) = %v, but http.ParseTime refuses it: %v", s, d, err)
		}
		if _, err := time.Parse("Monday, 02-Jan-06 15:04:05 GMT", v); err == nil {
			// RFC 850's two-digit year: the one within [now − 49, now + 50] years
			// (RFC 9110 §5.6.7), where http.ParseTime pivots at 1969.
			for when.Year() > now.Year()+50 {
				when = when.AddDate(-100, 0, 0)
			}
			for when.Year() <= now.Year()-50 {
				when = when.AddDate(100, 0, 0)
			}
			if when.Format("Monday, 02-Jan-06 15:04:05 GMT") != v {
				t.Fatalf("ParseRetryAfter(%q) = %v, but its weekday is not %v's", s, d, when)
			}
		}
		want := max(when.Sub(now), 0)
		want = min(want, callpath.MaxRetryAfter)
		if d != want {
			t.Fatalf("ParseRetryAfter(%q) = %v; http.ParseTime gives %v", s, d, want)
		}
	})
}
