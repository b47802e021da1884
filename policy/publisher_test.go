package policy_test

import (
	"strings"
	"testing"

	"github.com/backstop-go/backstop/policy"
)

// publisher is a stage of kind kind publishing gauges.
type publisher struct {
	kind   string
	gauges []policy.Gauge
}

func (p publisher) Placement() policy.Placement { return policy.Placement{Kind: p.kind} }
func (p publisher) Bind(next policy.Runner, _ policy.Env) policy.Runner {
	return next
}
func (publisher) Name() string             { return "q" }
func (p publisher) Gauges() []policy.Gauge { return p.gauges }

func TestCheckPublisher(t *testing.T) {
	one := func() float64 { return 1 }
	for _, c := range []struct {
		p    policy.Publisher
		want string // "" is fit
	}{
		{publisher{"call_quota", []policy.Gauge{{Name: "quota_left", Value: one}}}, ""},
		{nil, "AddStage(nil)"},
		{publisher{"", nil}, `the stage "q" has no Placement().Kind`},
		{publisher{"call_quota", []policy.Gauge{{Name: "left", Value: one}, {Name: "left", Value: one}}}, `publishes two gauges named "left"`},
		{publisher{"call_quota", []policy.Gauge{{Name: "QuotaLeft", Value: one}}}, `the gauge "QuotaLeft"; want a snake_case name`},
		{publisher{"call_quota", []policy.Gauge{{Name: "left"}}}, `the gauge "left"; want a snake_case name and a Value`},
	} {
		var p policy.Publisher
		if c.p != nil {
			p = c.p
		}
		err := policy.CheckPublisher(p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckPublisher(%+v) = %v, want nil", c.p, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("CheckPublisher(%+v) = %v, want an error holding %q", c.p, err, c.want)
		}
	}
}
