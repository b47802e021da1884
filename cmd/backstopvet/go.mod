module github.com/backstop-go/backstop/cmd/backstopvet

go 1.25.0

require (
	github.com/backstop-go/backstop v0.1.0
	golang.org/x/tools v0.48.0
)

require (
	golang.org/x/mod v0.38.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
