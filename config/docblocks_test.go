package config_test

import (
	"context"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/event"
	"github.com/backstop-go/backstop/policyhttp"
)

// The README's loader wiring, compiled with the tests so that it cannot drift from
// the API; it is not run.
var _ = func(ctx context.Context, obs event.Observer, reg prometheus.Registerer, addr string, creds grpc.DialOption) error {
	l, err := config.NewLoader("backstop.yaml", config.LoaderOptions{
		Options:    config.Options{Env: os.Environ(), Observer: obs},
		Registerer: reg, // backstop_config_reloads_total, …_last_reload_successful, …_stage_resets_total
	})
	if err != nil {
		return err // a program does not start on a file it cannot load
	}
	go l.Watch(ctx) // reloads when the file changes; call l.Reload() on SIGHUP
	client := &http.Client{Transport: l.Transport(nil, policyhttp.Options{})}
	conn, err := grpc.NewClient(addr, append(l.DialOptions(), creds)...)
	_, _ = client, conn
	return err
}
