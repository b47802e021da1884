package shed_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/shed"
)

// A Shedder is an event.Source: pipelines and metrics subscribe to its refusals.
var _ event.Source = (*shed.Shedder)(nil)

// sheds counts the event.Shed it hears, by pipeline, and those without Stage shed.
type sheds struct {
	mu       sync.Mutex
	by       map[string]int
	badStage int
}

func (s *sheds) Observe(e event.Event) {
	if e.Kind != event.Shed {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]int{}
	}
	s.by[e.Pipeline]++
	if e.Stage != shed.Kind {
		s.badStage++
	}
}

// TestShedder_SubscribersHearEveryRefusalOnce: a subscriber hears every refusal
// (the middleware's, Admit's and each pipeline's) once, under the pipeline that
// refused. That holds when it is subscribed twice, is also Options.Observer, or is
// among a pipeline's observers. Options.Observer and a pipeline's observer are
// subscribers too.
func TestShedder_SubscribersHearEveryRefusalOnce(t *testing.T) {
	var added, own, piped sheds
	s := policy.Must(shed.New(shed.Options{Name: "api", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1},
		Observer: event.Observers(&own, &added)}))
	s.Subscribe(&added, "elsewhere")
	s.Subscribe(event.Observers(&added), "")
	s.Subscribe(nil, "")
	pipelines := []*policy.Pipeline{
		policy.Must(policy.Wrap(s, policy.Name("piped"), policy.Observe(&piped))),
		policy.Must(policy.Wrap(s, policy.Name("both"), policy.Observe(event.Observers(&piped, &added)))),
		policy.Must(policy.Wrap(s, policy.Name("bare"))),
	}
	held, why := s.Admit(context.Background(), shed.PriorityDefault)
	require.Equal(t, shed.ReasonNone, why)
	defer held.Release()

	rec := httptest.NewRecorder()
	shed.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), s).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	_, why = s.Admit(context.Background(), shed.PriorityDefault)
	require.Equal(t, shed.ReasonLimit, why)
	for _, p := range pipelines {
		require.ErrorIs(t, p.Do(context.Background(), func(context.Context) error { return nil }), shed.ErrShed)
	}
	want := map[string]int{"": 2, "piped": 1, "both": 1, "bare": 1}
	require.Equal(t, want, added.by, "every refusal, once, under the pipeline that refused")
	require.Equal(t, want, own.by, "Options.Observer: every refusal, once")
	require.Equal(t, want, piped.by, "a pipeline's observer: every refusal, once")
	for _, o := range []*sheds{&added, &own, &piped} {
		require.Zero(t, o.badStage, "every event.Shed has Stage %q", shed.Kind)
	}
}
