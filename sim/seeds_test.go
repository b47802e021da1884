package sim_test

import (
	"reflect"
	"testing"

	"github.com/backstop-go/backstop/sim"
)

func TestParseSeeds(t *testing.T) {
	for in, want := range map[string][]uint64{"7": {7}, "1-3": {1, 2, 3}, "1, 4,7": {1, 4, 7}, "5-5": {5}} {
		if got, err := sim.ParseSeeds(in); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseSeeds(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "3-1", "1-1001", "1,,2", "-1"} {
		if got, err := sim.ParseSeeds(in); err == nil {
			t.Errorf("ParseSeeds(%q) = %v, want an error", in, got)
		}
	}
}
