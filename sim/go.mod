module github.com/backstop-go/backstop/sim

go 1.26.0

replace github.com/backstop-go/backstop => ../

require github.com/backstop-go/backstop v0.0.0-00010101000000-000000000000

require (
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
