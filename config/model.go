package config

import "time"

// File is a configuration file as written: the stacks it names, the defaults they
// inherit, and the routes that choose a stack per request. Every field is optional;
// a field left out is inherited from Defaults, else the library's default applies
// (each field's doc names it).
type File struct {
	// Defaults is the stack every stack inherits from, field by field.
	Defaults Stack `yaml:"defaults" json:"defaults"`
	// Stacks are the named stacks, one per dependency.
	Stacks []NamedStack `yaml:"stacks" json:"stacks"`
	// HTTP routes requests made through the HTTP transport to stacks.
	HTTP *HTTPRoutes `yaml:"http" json:"http"`
	// GRPC routes RPCs made through the gRPC interceptors to stacks.
	GRPC *GRPCRoutes `yaml:"grpc" json:"grpc"`
}

// NamedStack is one entry of File.Stacks.
type NamedStack struct {
	Name  string
	Stack Stack
}

// HTTPRoutes choose a stack per HTTP request.
type HTTPRoutes struct {
	// Default is the stack of requests no route matches. Without one, such a request
	// fails with policy.ErrNoPipeline: nothing runs a call bare unless told to.
	Default *string `yaml:"default" json:"default"`
	// Routes are matched as http.ServeMux matches patterns: the most specific wins,
	// whatever the order.
	Routes []HTTPRoute `yaml:"routes" json:"routes"`
}

// HTTPRoute is one HTTP route.
type HTTPRoute struct {
	// Match is a Go 1.22 http.ServeMux pattern: "[METHOD ][HOST]/[PATH]", e.g.
	// "POST api.example.com/v1/charges/{id}" or "GET /v1/".
	Match *string `yaml:"match" json:"match"`
	Stack *string `yaml:"stack" json:"stack"`
}

// GRPCRoutes choose a stack per RPC, as a gRPC service config's name entries do.
type GRPCRoutes struct {
	Default *string     `yaml:"default" json:"default"`
	Routes  []GRPCRoute `yaml:"routes" json:"routes"`
}

// GRPCRoute is one gRPC route: Name is "pkg.Service/Method" or "pkg.Service"
// (every method of it). A method's own route wins over its service's.
type GRPCRoute struct {
	Name  *string `yaml:"name" json:"name"`
	Stack *string `yaml:"stack" json:"stack"`
}

// Duration is a duration written as a Go duration string ("250ms", "1m30s"); a bare
// number is refused, its unit being unclear. Off is set by "off", which only a
// deadline, an attempt timeout and a retry's max_hint accept.
type Duration struct {
	D   time.Duration
	Off bool
}

// String returns the duration as written in a file.
func (d Duration) String() string {
	if d.Off {
		return "off"
	}
	return d.D.String()
}

// MarshalText writes the duration as a string, for fingerprints and JSON.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
