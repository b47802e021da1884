package config_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/backstop-go/backstop/config"
	"github.com/backstop-go/backstop/policy"
	"github.com/backstop-go/backstop/policygrpc"
)

// TestFromServiceConfig_ExplainsAsTheImport: a service config converted into a file,
// written and read back, builds stacks that do what policygrpc's own import does —
// the same attempts, the same backoff, the same worst case — and routes each name to
// its entry's stack.
func TestFromServiceConfig_ExplainsAsTheImport(t *testing.T) {
	for _, path := range []string{"../cmd/backstop/testdata/seed-grpc-service-config.json", "../cmd/backstop/testdata/service_config.json"} {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		sc, err := policygrpc.ParseServiceConfig(data)
		require.NoError(t, err)
		yml, err := config.Encode(config.FromServiceConfig(sc))
		require.NoError(t, err)
		c, err := config.Parse("converted.yaml", yml, config.Options{})
		require.NoError(t, err, "%s converted:\n%s", path, yml)
		for i, en := range sc.Entries() {
			want := en.Pipeline.Explain()
			got := c.Pipeline(c.Stacks()[i]).Explain()
			require.Equal(t, want.MaxAttempts, got.MaxAttempts, "%s %s", path, en.Field)
			require.Equal(t, want.WorstCase, got.WorstCase, "%s %s", path, en.Field)
			if len(want.Stack) > 0 && len(got.Stack) > 0 {
				require.Equal(t, sleepsOf(want.Stack), sleepsOf(got.Stack), "%s %s: the backoff", path, en.Field)
			}
			for _, name := range en.Names {
				if name == "/" {
					name = "/x.Y/Z" // the default entry: a method no other entry names
				} else if name[len(name)-1] == '/' {
					name += "AnyMethod"
				}
				r := c.GRPC().Match(name)
				require.NotNil(t, r, "%s: %s is routed", path, name)
				require.Equal(t, c.Stacks()[i], r.Stack, "%s: %s", path, name)
			}
		}
	}
}

func sleepsOf(stages []policy.Stage) any {
	for _, st := range stages {
		if st.Sleeps != nil {
			return st.Sleeps
		}
	}
	return nil
}

// TestEncode_WritesTheConvertedSeed: the seed's service config, as a Backstop file.
func TestEncode_WritesTheConvertedSeed(t *testing.T) {
	data, err := os.ReadFile("../cmd/backstop/testdata/seed-grpc-service-config.json")
	require.NoError(t, err)
	sc, err := policygrpc.ParseServiceConfig(data)
	require.NoError(t, err)
	yml, err := config.Encode(config.FromServiceConfig(sc))
	require.NoError(t, err)
	require.Equal(t, `stacks:
  method_config_0:
    budget:
      token_bucket:
        max_tokens: 10
        token_ratio: 0.1
    retry:
      attempts: 4
      strategy: grpc
      base: 100ms
      cap: 1s
      multiplier: 2
      grpc_codes: [UNAVAILABLE]
grpc:
  routes: [{name: orders.v1.OrderService, stack: method_config_0}]
`, string(yml))
}
