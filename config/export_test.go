package config

import "context"

// WatchReady is Watch, closing ready once the file is watched, for tests that must
// not write the file before.
func WatchReady(l *Loader, ctx context.Context, ready chan<- struct{}) error {
	return l.watch(ctx, ready)
}
