package policytest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policy/policytest"
)

// TestBodies: each response body is counted when handed out and once when closed,
// however often it is closed.
func TestBodies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	b := &policytest.Bodies{Next: base}
	c := &http.Client{Transport: b}
	first, err := c.Get(srv.URL)
	require.NoError(t, err)
	second, err := c.Get(srv.URL)
	require.NoError(t, err)
	require.Equal(t, int64(2), b.Opened())
	require.Zero(t, b.Closed())
	require.NoError(t, first.Body.Close())
	_ = first.Body.Close()
	require.Equal(t, int64(1), b.Closed(), "a second Close is not counted")
	require.NoError(t, second.Body.Close())
	require.Equal(t, b.Opened(), b.Closed())
}
