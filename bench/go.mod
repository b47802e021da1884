module github.com/backstop-go/backstop/bench

go 1.25.0

replace github.com/backstop-go/backstop => ../

require (
	github.com/backstop-go/backstop v0.0.0-00010101000000-000000000000
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/sony/gobreaker/v2 v2.4.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	golang.org/x/time v0.15.0 // indirect
)
