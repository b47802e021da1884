package callpath_test

import (
	"testing"

	"github.com/backstop-go/backstop/callpath"
)

func TestMesh_String(t *testing.T) {
	for m, want := range map[callpath.Mesh]string{
		callpath.MeshBackstopOwns: "MeshBackstopOwns",
		callpath.MeshNone:         "MeshNone",
		callpath.MeshEnvoyOwns:    "MeshEnvoyOwns",
		9:                         "Mesh(9)", // not a Mesh: the number is kept
	} {
		if got := m.String(); got != want {
			t.Errorf("Mesh(%d).String() = %q, want %q", uint8(m), got, want)
		}
	}
}
