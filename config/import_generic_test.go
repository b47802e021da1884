package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/config"
)

// lines places each field on a line of its own: the field's length.
type lines map[string]int

func (l lines) Position(field string) (line, col int) {
	if n, ok := l[field]; ok {
		return n, 3
	}
	return 0, 0
}

// TestImport_Generic: an Import built from outside the package with Add, Note and
// AddHTTPRoute loads as one of this package's own, its fields and notes placed by
// the origin's Source.
func TestImport_Generic(t *testing.T) {
	im := config.NewImport("routes.yaml")
	src := lines{"": 4, "retries.attempts": 9, "timeout": 7, "fault": 5}
	o := config.Origin{Format: "istio", Source: src}
	attempts := 0 // an invalid attempts count, to see where the problem is placed
	name := im.Add("reviews http[0]", config.Stack{Deadline: &config.Duration{D: time.Second}, Retry: &config.Retry{Attempts: &attempts}},
		o, map[string]string{"deadline": "timeout", "retry.attempts": "retries.attempts", "retry": "retries"})
	require.Equal(t, "reviews_http_0", name)
	require.Equal(t, "reviews_http_0_2", im.Add("reviews http[0]", config.Stack{}, o, nil), "a name taken is suffixed")
	im.Note(name, config.NoteNotCarried, "fault", "", "Istio injects faults; the stack does not")
	require.True(t, im.AddHTTPRoute("/reviews/", name))
	require.False(t, im.AddHTTPRoute("/reviews/", name), "a pattern is routed once")
	require.True(t, im.AddGRPCRoute("pkg.S/M", name))

	require.Len(t, im.Notes, 1)
	require.Equal(t, config.Pos{File: "routes.yaml", Line: 5, Column: 3}, im.Notes[0].Pos)
	_, err := im.Build(config.Options{})
	var ce *config.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 9, ce.Problems[0].Pos.Line, "%v", err)

	attempts = 3
	c, err := im.Build(config.Options{})
	require.NoError(t, err)
	o2, ok := c.Origin(name)
	require.True(t, ok)
	field, pos := o2.Field("retry.attempts")
	require.Equal(t, "retries.attempts", field)
	require.Equal(t, 9, pos.Line)
	field, pos = o2.Field("retry.base")
	require.Equal(t, "retries", field, "a field not mapped: the nearest above it")
	require.Equal(t, 0, pos.Line, "the source does not place retries")
	require.Equal(t, 3, c.Pipeline(name).Explain().MaxAttempts)
}
