module github.com/backstop-go/backstop/sim

go 1.26.0

require github.com/backstop-go/backstop v0.1.0

require (
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
