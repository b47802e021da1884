module github.com/backstop-go/backstop/cmd/backstopvet

go 1.25.0

replace github.com/backstop-go/backstop => ../..

require (
	github.com/backstop-go/backstop v0.0.0-00010101000000-000000000000
	golang.org/x/tools v0.48.0
)

require (
	golang.org/x/mod v0.38.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
