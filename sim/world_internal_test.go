package sim

import (
	"slices"
	"testing"
)

// callOrder walks from the entries down each one's calls, the first dependency
// first, before the next entry; services no entry reaches come last, walked in turn.
func TestCallOrder_FollowsCalls(t *testing.T) {
	sc := Scenario{Entries: []string{"b", "a"}, Services: []Service{
		{Name: "a", Calls: []string{"c", "d"}}, // 0
		{Name: "b", Calls: []string{"d"}},      // 1
		{Name: "c"},                            // 2
		{Name: "d", Calls: []string{"e"}},      // 3
		{Name: "e"},                            // 4
		{Name: "f", Calls: []string{"g"}},      // 5: no entry reaches it
		{Name: "g"},                            // 6
	}}
	if got, want := callOrder(sc), []int{1, 3, 4, 0, 2, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("callOrder = %v, want %v (b d e a c f g)", got, want)
	}
	sc.Entries = nil // the first service is the entry
	if got, want := callOrder(sc), []int{0, 2, 3, 4, 1, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("callOrder without entries = %v, want %v (a c d e b f g)", got, want)
	}
	layered := Layered(Backstop, 12, 1, Load{}) // six layers of two: L0-i calls L1-i …
	order := callOrder(layered)
	var names []string
	for _, i := range order[:6] {
		names = append(names, layered.Services[i].Name)
	}
	if want := []string{"L0-0", "L1-0", "L2-0", "L3-0", "L4-0", "L5-0"}; !slices.Equal(names, want) {
		t.Errorf("layered: first six %v, want %v", names, want)
	}
}
