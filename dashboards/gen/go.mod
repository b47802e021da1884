module github.com/backstop-go/backstop/dashboards/gen

go 1.25.0

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
