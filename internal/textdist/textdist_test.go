package textdist_test

import (
	"strings"
	"testing"

	"github.com/backstop-go/backstop/internal/textdist"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"5xxx", "5xx", 1}, {"num_retrys", "num_retries", 2}, {"ordrs", "orders", 1},
		{"kitten", "sitting", 3}, {"héllo", "hello", 1}, {strings.Repeat("a", 65), "a", 64},
	} {
		if got := textdist.Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d; want %d", c.a, c.b, got, c.want)
		}
	}
}
