package config

import (
	"fmt"
	"sort"
	"strings"

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
}

// Formats an [Origin] comes from.
const (
	FormatEnvoy = "envoy" // an Envoy route
	FormatGRPC  = "grpc"  // a gRPC service config's methodConfig entry
)

// Origin is what a stack of an [Import] was in the original: an Envoy route, or a
// gRPC service config's methodConfig entry, kept so that tools can speak of the stack
// in the original's words and place what they say in the original's file.
type Origin struct {
	// Format is FormatEnvoy or FormatGRPC.
	Format string
	// File names the original's file.
	File string
	// Route is the Envoy route, for FormatEnvoy.
	Route *policyenvoy.Route
	// ServiceConfig and Entry are the service config and the entry, for FormatGRPC.
	ServiceConfig *policygrpc.ServiceConfig
	Entry         policygrpc.Entry
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
	var line, col int
	switch o.Format {
	case FormatEnvoy:
		line, col = o.Route.Position(field)
	case FormatGRPC:
		line, col = o.ServiceConfig.Position(field)
	}
	return field, Pos{File: o.File, Line: line, Column: col}
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

// note adds a note about a stack, placed at the original's field.
func (im *Import) note(stack string, o Origin, reason, field, value, format string, args ...any) {
	line, col := 0, 0
	switch o.Format {
	case FormatEnvoy:
		line, col = o.Route.Position(field)
	case FormatGRPC:
		line, col = o.ServiceConfig.Position(field)
	}
	im.Notes = append(im.Notes, Note{Stack: stack, Reason: reason, Field: field, Value: value,
		Pos: Pos{File: o.File, Line: line, Column: col}, Msg: fmt.Sprintf(format, args...)})
}

// nearest returns the word of known within two edits of w, the closest first; "" if
// none is.
func nearest(w string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(w), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}
