package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/backstop-go/backstop/internal/textdist"
	"github.com/backstop-go/backstop/policyenvoy"
	"github.com/backstop-go/backstop/policygrpc"
)

// An Import is another format's configuration — Envoy routes ([ImportEnvoy]), a gRPC
// service config ([ImportServiceConfig]) — in this package's model: the [File] it
// converts into, what each stack was in the original, and a [Note] for each thing
// the original says that the file says otherwise or cannot say. [Import.Build] loads
// it as [Parse] loads a file, with every position in the original, so that one
// [Config] explains and lints all three formats alike.
//
// An Import is a value: build it with its constructors, and do not change it after
// Build.
type Import struct {
	// Name is the original's file name, as positions name it.
	Name string
	// File is the original in this package's model.
	File File
	// Origins are what each stack of File was, by stack name.
	Origins map[string]Origin
	// Notes are what the model does not carry as the original says it, in the
	// original's order.
	Notes []Note
	// pos places the model's fields ("stacks.route.retry.attempts",
	// "http.routes[0].match") in the original.
	pos map[string]Pos
	// taken and routed index the stack names and the routes Add and AddHTTPRoute,
	// AddGRPCRoute gave (routes by "http " or "grpc " and the match), so that
	// building an import of many routes takes linear time; built on first use.
	taken, routed map[string]bool
}

// index builds taken and routed from what the import holds.
func (im *Import) index() {
	if im.taken != nil {
		return
	}
	im.taken, im.routed = make(map[string]bool, len(im.File.Stacks)), make(map[string]bool)
	for _, ns := range im.File.Stacks {
		im.taken[ns.Name] = true
	}
	if im.File.HTTP != nil {
		for _, r := range im.File.HTTP.Routes {
			if r.Match != nil {
				im.routed["http "+*r.Match] = true
			}
		}
	}
	if im.File.GRPC != nil {
		for _, r := range im.File.GRPC.Routes {
			if r.Name != nil {
				im.routed["grpc "+*r.Name] = true
			}
		}
	}
}

// Formats an [Origin] comes from.
const (
	FormatEnvoy = "envoy" // an Envoy route
	FormatGRPC  = "grpc"  // a gRPC service config's methodConfig entry
)

// A Source places an original's fields in its file: the line and column where a
// field, named as the original spells it, is written; 0, 0 when unknown. An
// [Origin] of a format this package does not read itself (Gateway API, Istio or
// Linkerd routes, as policyk8s reads them) carries one, so that notes and problems
// are placed in the original as for Envoy routes and gRPC service configs.
type Source interface {
	Position(field string) (line, col int)
}

// Origin is what a stack of an [Import] was in the original: an Envoy route, a
// gRPC service config's methodConfig entry, or a route of another format that
// brings its own [Source], kept so that tools can speak of the stack in the
// original's words and place what they say in the original's file.
type Origin struct {
	// Format is FormatEnvoy, FormatGRPC, or another format's name ("istio").
	Format string
	// File names the original's file.
	File string
	// Route is the Envoy route, for FormatEnvoy.
	Route *policyenvoy.Route
	// ServiceConfig and Entry are the service config and the entry, for FormatGRPC.
	ServiceConfig *policygrpc.ServiceConfig
	Entry         policygrpc.Entry
	// Source places the original's fields, for a format other than FormatEnvoy
	// and FormatGRPC; Route, for instance, a policyk8s route.
	Source Source
	// fields are the original's fields the stack's fields came from, by the stack's
	// field path ("retry.attempts" → "retry_policy.num_retries").
	fields map[string]string
}

// Field returns the original's field that a stack's field (rel: "deadline",
// "retry.attempts", "retry.grpc_codes[1]") was converted from, as the original spells
// it, and where it is written; a field the original leaves out is placed at the
// nearest field above it that it has. rel "" is the route or entry itself.
func (o Origin) Field(rel string) (string, Pos) {
	field := o.fieldOf(rel)
	line, col := o.position(field)
	return field, Pos{File: o.File, Line: line, Column: col}
}

// position places an original's field, as the original spells it.
func (o Origin) position(field string) (line, col int) {
	switch {
	case o.Format == FormatEnvoy && o.Route != nil:
		return o.Route.Position(field)
	case o.Format == FormatGRPC && o.ServiceConfig != nil:
		return o.ServiceConfig.Position(field)
	case o.Source != nil:
		return o.Source.Position(field)
	}
	return 0, 0
}

func (o Origin) fieldOf(rel string) string {
	for p := rel; ; {
		if f, ok := o.fields[p]; ok {
			return f
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return o.fields[""]
}

// Note is one thing an original says that its [Import]'s file says otherwise or
// cannot say.
type Note struct {
	// Stack is the stack it is about.
	Stack string
	// Reason is NoteUnknown, NoteNotCarried, NoteIgnored, NoteCapped or NoteDiffers.
	Reason string
	// Field is the original's field, as the original spells it
	// ("retry_policy.retry_on"), and Pos where it is written.
	Field string
	Pos   Pos
	// Value is the value at fault as written: a retry_on condition, a maxAttempts;
	// for a setting policyenvoy does not support, the setting as Route.Unsupported
	// names it ("retry_policy.retry_on internal (a gRPC condition: …)").
	Value string
	// Meant is, for NoteUnknown, the known value nearest to Value; "" if none is near.
	Meant string
	// Msg says what the original does and what the stack does instead.
	Msg string
}

// The reasons of a [Note].
const (
	// NoteUnknown: a value the original's own software does not know (a retry_on
	// condition Envoy does not have), which it ignores; so does the stack.
	NoteUnknown = "unknown"
	// NoteNotCarried: a field the original honours and the model has no field for.
	NoteNotCarried = "not-carried"
	// NoteIgnored: a field the original itself ignores as written (retriable
	// status codes without the condition that reads them); so does the stack.
	NoteIgnored = "ignored"
	// NoteCapped: a value the original's software caps (gRPC's maxAttempts above 5);
	// the stack has the cap.
	NoteCapped = "capped"
	// NoteDiffers: the stack does it otherwise, and the note says how.
	NoteDiffers = "differs"
)

// String returns "file:line:column: field: message".
func (n Note) String() string {
	return fmt.Sprintf("%s: %s: %s", n.Pos, n.Field, n.Msg)
}

// Build loads the import as [Parse] loads a file: it checks every stack and route,
// builds every stage and pipeline, and refuses the whole of it with an [*Error]
// whose problems are placed in the original. Options.Env is not read: environment
// overrides are for Backstop's own files.
func (im *Import) Build(o Options) (*Config, error) {
	d := &decoder{file: im.Name, pos: make(map[string]Pos, len(im.pos))}
	for k, v := range im.pos {
		d.pos[k] = v
	}
	f := im.File
	b := &builder{d: d, o: o}
	c := b.build(&f)
	if len(d.probs) > 0 {
		sortProblems(d.probs)
		return nil, &Error{Problems: d.probs}
	}
	c.origins, c.notes = im.Origins, im.Notes
	return c, nil
}

// Origin returns what a stack was in the original it was imported from, and false
// for a stack of a Backstop file.
func (c *Config) Origin(stack string) (Origin, bool) {
	o, ok := c.origins[stack]
	return o, ok
}

// Notes returns what the original the configuration was imported from says that it
// says otherwise or cannot say; nil for a Backstop file.
func (c *Config) Notes() []Note { return append([]Note(nil), c.notes...) }

// place records where each of a stack's fields is in the original, from its origin.
func (im *Import) place(name string, o Origin) {
	if im.pos == nil {
		im.pos = make(map[string]Pos)
	}
	rels := make([]string, 0, len(o.fields))
	for rel := range o.fields {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	for _, rel := range rels {
		_, pos := o.Field(rel)
		path := "stacks." + name
		if rel != "" {
			path += "." + rel
		}
		im.pos[path] = pos
	}
}

// NewImport returns an empty Import of the original file name: for a format this
// package does not convert itself, to fill with [Import.Add], [Import.Note],
// [Import.AddHTTPRoute] and [Import.AddGRPCRoute], and load with [Import.Build].
func NewImport(name string) *Import {
	return &Import{Name: name, Origins: make(map[string]Origin)}
}

// Add adds a stack converted from the original and returns its name: name made a
// stack name (letters, digits, _ and -, starting with a letter; "prefix /api" is
// prefix_api) and, if taken, suffixed _2, _3, …. o is what the stack was, with a
// Source to place its fields; fields maps each of the stack's fields to the
// original's field it came from ("retry.attempts" → "retries.attempts"), "" to
// the route or entry itself. A stack field not in fields is placed at the nearest
// field above it that is.
func (im *Import) Add(name string, s Stack, o Origin, fields map[string]string) string {
	im.index()
	stack := stackNameOf(name, im.taken)
	if im.Origins == nil {
		im.Origins = make(map[string]Origin)
	}
	if o.File == "" {
		o.File = im.Name
	}
	o.fields = map[string]string{"": ""}
	for k, v := range fields {
		o.fields[k] = v
	}
	im.File.Stacks = append(im.File.Stacks, NamedStack{Name: stack, Stack: s})
	im.Origins[stack] = o
	im.place(stack, o)
	return stack
}

// Note adds a note about stack, a stack [Import.Add] returned: reason is one of
// NoteUnknown, NoteNotCarried, NoteIgnored, NoteCapped and NoteDiffers; field is
// the original's field as the original spells it, placed by the stack's origin;
// value the value at fault as written; msg what the original does and what the
// stack does instead.
func (im *Import) Note(stack, reason, field, value, msg string) {
	im.note(stack, im.Origins[stack], reason, field, value, "%s", msg)
}

// AddHTTPRoute routes the requests an http.ServeMux pattern matches to stack,
// placed where the stack's origin is written. A pattern is routed once: the later
// of two routes to it is dropped and false returned, for the caller to note.
func (im *Import) AddHTTPRoute(pattern, stack string) bool {
	if im.File.HTTP == nil {
		im.File.HTTP = &HTTPRoutes{}
	}
	im.index()
	if im.routed["http "+pattern] {
		return false
	}
	im.routed["http "+pattern] = true
	k := len(im.File.HTTP.Routes)
	_, pos := im.Origins[stack].Field("")
	if im.pos == nil {
		im.pos = make(map[string]Pos)
	}
	im.pos[fmt.Sprintf("http.routes[%d]", k)] = pos
	im.pos[fmt.Sprintf("http.routes[%d].match", k)] = pos
	im.File.HTTP.Routes = append(im.File.HTTP.Routes, HTTPRoute{Match: ptr(pattern), Stack: ptr(stack)})
	return true
}

// AddGRPCRoute routes the RPCs of name ("pkg.Service/Method" or "pkg.Service") to
// stack, as AddHTTPRoute routes a pattern.
func (im *Import) AddGRPCRoute(name, stack string) bool {
	if im.File.GRPC == nil {
		im.File.GRPC = &GRPCRoutes{}
	}
	im.index()
	if im.routed["grpc "+name] {
		return false
	}
	im.routed["grpc "+name] = true
	k := len(im.File.GRPC.Routes)
	_, pos := im.Origins[stack].Field("")
	if im.pos == nil {
		im.pos = make(map[string]Pos)
	}
	im.pos[fmt.Sprintf("grpc.routes[%d]", k)] = pos
	im.pos[fmt.Sprintf("grpc.routes[%d].name", k)] = pos
	im.File.GRPC.Routes = append(im.File.GRPC.Routes, GRPCRoute{Name: ptr(name), Stack: ptr(stack)})
	return true
}

// note adds a note about a stack, placed at the original's field.
func (im *Import) note(stack string, o Origin, reason, field, value, format string, args ...any) {
	line, col := o.position(field)
	im.Notes = append(im.Notes, Note{Stack: stack, Reason: reason, Field: field, Value: value,
		Pos: Pos{File: o.File, Line: line, Column: col}, Msg: fmt.Sprintf(format, args...)})
}

// nearest returns the word of known within two edits of w, the closest first; "" if
// none is.
func nearest(w string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := textdist.Distance(strings.ToLower(w), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}
