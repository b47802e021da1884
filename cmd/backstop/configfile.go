package main

import (
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/backstop-go/backstop/config"
)

// configView is a Backstop configuration explained: its routing tables and stacks.
type configView struct{ e config.Explanation }

func (v configView) text(w io.Writer) { io.WriteString(w, v.e.String()) }

func (v configView) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Config string                    `json:"config"` // "backstop"
		File   string                    `json:"file"`
		HTTP   []config.RouteExplanation `json:"http_routes"`
		GRPC   []config.RouteExplanation `json:"grpc_routes"`
		Stacks []config.StackExplanation `json:"stacks"`
	}{"backstop", v.e.File, v.e.HTTP, v.e.GRPC, v.e.Stacks})
}

// configRefused turns each problem of a refused Backstop configuration into a
// finding: "order" for a broken ordering rule, "refused" for the rest. Each
// finding's fix is its problem's own.
func (l *linter) configRefused(file string, err error) {
	var ce *config.Error
	if !errors.As(err, &ce) {
		l.add("refused", file, 0, 0, "", "", "", "%v", err)
		return
	}
	for _, p := range ce.Problems {
		id, msg := "refused", p.Msg
		if p.Rule != "" {
			id, msg = "order", p.Rule+": "+p.Msg
		}
		fix := p.Fix
		where := p.Pos.File
		if p.Path != "" {
			msg = p.Path + ": " + msg
		}
		if p.Pos.Env != "" { // a value from the environment: the file as a whole, naming the variable
			where, msg = file, "$"+p.Pos.Env+": "+msg
		}
		l.add(id, where, p.Pos.Line, p.Pos.Column, "", p.Path, fix, "%s", msg)
	}
}

// positionOf returns where a stack's field was written: in the stack, else in the
// defaults, else the stack's name.
func positionOf(c *config.Config, stack, rel string) (config.Pos, string) {
	for p := rel; p != ""; {
		for _, full := range []string{"stacks." + stack + "." + p, "defaults." + p} {
			if pos, ok := c.Position(full); ok {
				return pos, full
			}
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	pos, _ := c.Position("stacks." + stack)
	return pos, "stacks." + stack
}
