package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policy"
)

// TestStages_CoverEveryField: every stage field of Stack has its entry in the table,
// whose example holds the stage and builds it.
func TestStages_CoverEveryField(t *testing.T) {
	typ := reflect.TypeFor[Stack]()
	fields := 0
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "order" {
			continue
		}
		fields++
		d := stageNamed(name)
		require.NotNil(t, d, "Stack.%s (%s) has no entry in stages", f.Name, name)
		require.True(t, d.on(d.example), "stage %s: its example does not hold it", name)
		require.NotEmpty(t, d.place().Kind, "stage %s: its placement has no Kind", name)
	}
	require.Len(t, stages, fields, "stages has an entry for no field of Stack")
}

// TestStages_CanonicalOrderObeysTheRules: the table's order, with one retry (a retry
// or a hedge), is an order policy.CheckPlacements accepts.
func TestStages_CanonicalOrderObeysTheRules(t *testing.T) {
	for _, drop := range []string{StageRetry, StageHedge} {
		var places []policy.Placement
		for _, d := range stages {
			if d.name != drop {
				places = append(places, d.place())
			}
		}
		require.NoError(t, policy.CheckPlacements(places...), "the canonical order without %s", drop)
	}
}
