module github.com/backstop-go/backstop/sim

go 1.25.0

require (
	github.com/backstop-go/backstop v0.1.0
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.5
)

require (
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
