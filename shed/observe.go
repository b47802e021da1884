package shed

import (
	"context"
	"reflect"
	"slices"
	"time"

	"github.com/backstop-go/backstop/event"
)

// Subscribe implements event.Source: o hears every refusal of the shedder from now on,
// as an event.Shed. That is the middleware's refusals, Admit's, and those of every
// pipeline the shedder is a stage of. Each event names the pipeline that refused (""
// for the middleware and Admit), not the pipeline given here.
//
// An o subscribed twice hears each refusal once, and so does each of [event.Members] of
// o. Pass a pointer: other values are kept in a box of their own each time. A nil o is
// ignored. Options.Observer is the first subscriber. policy.Wrap subscribes a
// pipeline's Observer, and metrics.Observer.AddShedder subscribes its own.
func (s *Shedder) Subscribe(o event.Observer, _ string) {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	var list []event.Observer
	if cur := s.subs.Load(); cur != nil {
		list = append(list, *cur...)
	}
	for _, m := range event.Members(o) {
		if reflect.TypeOf(m).Kind() != reflect.Pointer {
			m = &boxed{m}
		}
		if !slices.Contains(list, m) {
			list = append(list, m)
		}
	}
	if len(list) > 0 {
		s.subs.Store(&list)
	}
}

type boxed struct{ event.Observer }

// report sends the event.Shed of a refusal in pipeline ("" for the middleware and
// Admit) to each subscriber.
func (s *Shedder) report(ctx context.Context, pipeline string, r Reason, p Priority, ra int) {
	subs := s.subs.Load()
	if subs == nil {
		return
	}
	e := event.Event{Kind: event.Shed, Stage: Kind, Pipeline: pipeline, Source: s.name, Time: s.clock.Now(),
		Reason: r.String(), Priority: p.String(), Delay: time.Duration(ra) * time.Second, Level: float64(s.limit.Load()), Context: ctx}
	for _, o := range *subs {
		o.Observe(e)
	}
}
