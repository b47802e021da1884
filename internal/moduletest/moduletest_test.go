package moduletest

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestEveryModuleHasItsPackage guards the README's promise that go test ./... tests
// every module: a module added to go.work without its package under internal/modules
// would go untested, and a package left behind by a removed module would fail.
func TestEveryModuleHasItsPackage(t *testing.T) {
	root, modules, ok := Workspace(t)
	if !ok {
		t.Skip("not in the Backstop workspace (go env GOWORK is empty or off): there are no nested modules to look for")
	}
	var packages []string
	dir := filepath.Join(root, modulesDir)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".go" {
			return err
		}
		rel, err := filepath.Rel(dir, filepath.Dir(path))
		packages = append(packages, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(modules) == 0 {
		t.Fatal("go.work uses no nested module; want the integrations (policygrpc, fleet, …)")
	}
	for _, m := range modules {
		if !slices.Contains(packages, m) {
			t.Errorf("go.work uses %s, but %s/%s/module_test.go is missing: go test ./... would not test it", m, modulesDir, m)
		}
	}
	for _, p := range packages {
		if !slices.Contains(modules, p) {
			t.Errorf("%s/%s tests a module go.work does not use", modulesDir, p)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("the workspace root %s has no go.mod: %v", root, err)
	}
}

func TestCount(t *testing.T) {
	out := "=== RUN   TestX\n--- PASS: TestX (0.00s)\nok  \tgithub.com/backstop-go/backstop/policygrpc\t1.2s\n" +
		"?   \tgithub.com/backstop-go/backstop/policygrpc/internal/x\t[no test files]\n" +
		"FAIL\tgithub.com/backstop-go/backstop/policygrpc/y\t0.3s\nFAIL\n"
	tested, untested := count([]byte(out))
	if tested != 2 || untested != 1 {
		t.Errorf("count(go test output) = %d tested, %d without tests; want 2 and 1", tested, untested)
	}
}
