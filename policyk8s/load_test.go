package policyk8s_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/policyk8s"
)

// TestLoad_TenThousandManifests: a directory of 10 000 manifest files, in 100
// folders, each an HTTPRoute with a retry and a Deployment beside it, is read whole.
// Time and memory are measured and logged, not asserted: they depend on the
// machine.
func TestLoad_TenThousandManifests(t *testing.T) {
	dir := t.TempDir()
	const folders, files = 100, 100
	for f := range folders {
		sub := filepath.Join(dir, fmt.Sprintf("team%03d", f))
		require.NoError(t, os.Mkdir(sub, 0o755))
		for i := range files {
			n := f*files + i
			yml := fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: route-%d
  namespace: team%03d
spec:
  parentRefs: [{name: edge}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /svc%d}}]
    backendRefs: [{name: svc-%d, port: 80}]
    timeouts: {request: 5s, backendRequest: 1s}
    retry: {attempts: %d, codes: [503], backoff: 100ms}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: svc-%d}
spec: {replicas: 1}
`, n, f, n, n, 1+n%3, n)
			require.NoError(t, os.WriteFile(filepath.Join(sub, fmt.Sprintf("m%03d.yaml", i)), []byte(yml), 0o644))
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("not a manifest"), 0o644))

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	set, err := policyk8s.Load(dir)
	took := time.Since(start)
	require.NoError(t, err)
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("Load of %d files: %v, %.1f MB allocated in all, %.1f MB live after (the Set)",
		folders*files, took, float64(after.TotalAlloc-before.TotalAlloc)/1e6, float64(after.HeapAlloc)/1e6)

	require.Len(t, set.Routes, folders*files)
	require.Len(t, set.Notes, folders*files, "one note per Deployment skipped; README.md is not read")
	tries := map[int]int{}
	for _, r := range set.Routes {
		tries[r.Tries]++
	}
	// attempts 1 + n%3 retries: 2, 3 or 4 tries, in thirds.
	require.Equal(t, map[int]int{2: 3334, 3: 3333, 4: 3333}, tries)
	last := set.Routes[len(set.Routes)-1]
	require.Equal(t, "route-9999", last.Name)
	require.Equal(t, 9, last.Line, "the rule's line in its file")
	runtime.KeepAlive(set)
}
