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

func (s *sheds) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.by {
		n += v
	}
	return n
}

// TestShedder_AddObserverHearsEveryRefusalOnce: an observer added with AddObserver
// hears every refusal — the middleware's, Admit's, and a pipeline's whatever the
// pipeline's observer — once, even when it is added twice, is also Options.Observer,
// or is among the pipeline's observers; the others still hear what they heard.
func TestShedder_AddObserverHearsEveryRefusalOnce(t *testing.T) {
	var added, own, piped sheds
	s := policy.Must(shed.New(shed.Options{Name: "api", Limit: shed.LimitOptions{Fixed: 1}, Queue: shed.QueueOptions{Max: -1},
		Observer: event.Observers(&own, &added)}))
	s.AddObserver(&added)
	s.AddObserver(event.Observers(&added))
	s.AddObserver(nil)
	held, why := s.Admit(context.Background(), shed.PriorityDefault)
	require.Equal(t, shed.ReasonNone, why)
	defer held.Release()

	rec := httptest.NewRecorder()
	shed.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), s).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	_, why = s.Admit(context.Background(), shed.PriorityDefault)
	require.Equal(t, shed.ReasonLimit, why)
	for _, p := range []*policy.Pipeline{
		policy.Must(policy.Wrap(s, policy.Name("piped"), policy.Observe(&piped))),
		policy.Must(policy.Wrap(s, policy.Name("both"), policy.Observe(event.Observers(&piped, &added)))),
		policy.Must(policy.Wrap(s, policy.Name("bare"))),
	} {
		require.ErrorIs(t, p.Do(context.Background(), func(context.Context) error { return nil }), shed.ErrShed)
	}
	require.Equal(t, 5, added.total(), "every refusal, once")
	require.Equal(t, map[string]int{"": 2, "piped": 1, "both": 1, "bare": 1}, added.by, "under the pipeline that refused")
	require.Equal(t, 3, own.total(), "Options.Observer: the middleware's, Admit's and the unobserved pipeline's")
	require.Equal(t, 2, piped.total(), "a pipeline's observer: its pipeline's")
	for _, o := range []*sheds{&added, &own, &piped} {
		require.Zero(t, o.badStage, "every event.Shed has Stage %q", shed.Kind)
	}
}
