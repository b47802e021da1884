package callpath

import (
	"strings"
	"time"
)

// MaxRetryAfter is the largest delay [ParseRetryAfter] returns: larger values, in
// seconds or as a date, saturate at it. It bounds [HeaderRetryAfterMillis] the same
// way. A retry may refuse to wait that long (retry's Options.MaxHintDelay).
const MaxRetryAfter = 24 * time.Hour

// The three HTTP-date forms of RFC 9110 §5.6.7.
var httpDateLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",  // IMF-fixdate, the preferred form
	"Monday, 02-Jan-06 15:04:05 GMT", // obsolete RFC 850 form
	"Mon Jan _2 15:04:05 2006",       // obsolete asctime form
}

// ParseRetryAfter reads the value of a Retry-After header (RFC 9110 §10.2.3). The
// value is delay-seconds (1*DIGIT) or an HTTP-date in GMT, in any of the three forms
// of §5.6.7: IMF-fixdate, RFC 850, asctime. A date becomes a delay from now; a date in
// the past gives 0. Surrounding whitespace is allowed. Values above [MaxRetryAfter]
// saturate at it. Anything else gives false: empty, negative, fractional, a sign,
// garbage. So does a date not in exactly one of those forms (one-digit hours, a
// weekday that does not match the date).
//
// Transports turn the delay into a retry's hint: policyhttp marks the attempt's error
// with fault.After.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		return parseSeconds(v)
	}
	for i, layout := range httpDateLayouts {
		t, err := time.Parse(layout, v)
		if err != nil {
			continue
		}
		if i == rfc850 {
			t = rfc850Year(t, now)
		}
		// time.Parse is lenient (one-digit hours, any weekday): the value must be
		// exactly what the layout prints for the instant read.
		if t.Format(layout) != v {
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

// rfc850 is the index of the RFC 850 form in httpDateLayouts.
const rfc850 = 1

// rfc850Year puts a date read in the RFC 850 form, whose year has two digits, in the
// century RFC 9110 §5.6.7 says: "Recipients of a timestamp value in rfc850-date format,
// which uses a two-digit year, MUST interpret a timestamp that appears to be more than
// 50 years in the future as representing the most recent year in the past that had the
// same last two digits" — the year with those digits from 49 years before now's to 50
// after. (time.Parse puts 69–99 in the 1900s and 00–68 in the 2000s, whatever now is.)
func rfc850Year(t, now time.Time) time.Time {
	year := now.Year() - now.Year()%100 + t.Year()%100
	switch {
	case year > now.Year()+50:
		year -= 100
	case year <= now.Year()-50:
		year += 100
	}
	return time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
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
