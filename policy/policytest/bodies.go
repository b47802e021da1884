package policytest

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// Bodies is an http.RoundTripper that counts the response bodies Next hands out,
// and those closed. With it, a test or a load run can check that a client leaves
// none open. The client may be a policyhttp transport retrying, or a caller
// discarding attempts. Opened and Closed are equal once every response is done
// with.
//
// A Bodies is safe for concurrent use. Next is required.
type Bodies struct {
	Next           http.RoundTripper
	opened, closed atomic.Int64
}

// RoundTrip sends r through Next and counts the response body it returns.
func (b *Bodies) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := b.Next.RoundTrip(r)
	if err == nil {
		b.opened.Add(1)
		res.Body = CountCloses(res.Body, &b.closed)
	}
	return res, err
}

// Opened returns how many response bodies RoundTrip has handed out.
func (b *Bodies) Opened() int64 { return b.opened.Load() }

// Closed returns how many of them have been closed.
func (b *Bodies) Closed() int64 { return b.closed.Load() }

// CountCloses returns rc, adding 1 to n the first time it is closed. A second
// Close is passed on and not counted.
func CountCloses(rc io.ReadCloser, n *atomic.Int64) io.ReadCloser {
	return &closeCounter{ReadCloser: rc, n: n}
}

type closeCounter struct {
	io.ReadCloser
	n    *atomic.Int64
	once sync.Once
}

func (c *closeCounter) Close() error {
	c.once.Do(func() { c.n.Add(1) })
	return c.ReadCloser.Close()
}
