package retry

import (
	"strings"
	"time"
)

// MaxRetryAfter is the largest delay [ParseRetryAfter] returns: larger values, in
// seconds or as a date, saturate at it. (Options.MaxHintDelay caps what the retry loop
// will actually wait.)
const MaxRetryAfter = 24 * time.Hour

// The three HTTP-date forms of RFC 9110 §5.6.7.
var httpDateLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",  // IMF-fixdate, the preferred form
	"Monday, 02-Jan-06 15:04:05 GMT", // obsolete RFC 850 form
	"Mon Jan _2 15:04:05 2006",       // obsolete asctime form
}

// ParseRetryAfter reads the value of a Retry-After header (RFC 9110 §10.2.3): either
// delay-seconds (1*DIGIT) or an HTTP-date in any of the three forms of §5.6.7
// (IMF-fixdate, RFC 850, asctime), all in GMT. A date is turned into a delay from now; a
// date in the past gives 0. Surrounding whitespace is allowed. Values above
// [MaxRetryAfter] saturate at it. Anything else — empty, negative, fractional, a sign,
// garbage, a date not in exactly one of those forms (one-digit hours, a weekday that
// does not match the date) — gives false.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		return parseSeconds(v)
	}
	for _, layout := range httpDateLayouts {
		t, err := time.Parse(layout, v)
		// time.Parse is lenient (one-digit hours, any weekday): the value must be
		// exactly what the layout prints for the instant read.
		if err != nil || t.Format(layout) != v {
			continue
		}
		d := t.Sub(now)
		switch {
		case d < 0:
			return 0, true
		case d > MaxRetryAfter:
			return MaxRetryAfter, true
		}
		return d, true
	}
	return 0, false
}

const maxRetryAfterSeconds = int64(MaxRetryAfter / time.Second)

func parseSeconds(v string) (time.Duration, bool) {
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= maxRetryAfterSeconds {
			n = n*10 + int64(c-'0')
		}
	}
	if n > maxRetryAfterSeconds {
		return MaxRetryAfter, true
	}
	return time.Duration(n) * time.Second, true
}
