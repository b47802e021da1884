// Package fleettest starts a real redis-server for tests and examples of the fleet
// policies: on a free 127.0.0.1 port, without persistence, stopped by its caller.
package fleettest
