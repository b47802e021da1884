// Package policytest checks that a [policy.Policy] keeps the contract every stage
// of a pipeline relies on, in the manner of testing/slogtest. It also provides the
// library's one fake [Clock] and one fake [Rand] for tests. [Bodies] counts the
// HTTP response bodies a client leaves open.
//
// # Conformance
//
// A third-party policy runs the suite from its own tests:
//
//	func TestConformance(t *testing.T) {
//		policytest.Run(t, func() policy.Policy { return mypolicy.New() })
//	}
//
// The suite binds each fresh policy once, directly. It does not use policy.Wrap,
// so stages that need a retry around them can be checked alone. It then checks
// that:
//   - a nil error from fn is returned as nil, and fn runs exactly once;
//   - fn's error comes back so that errors.Is finds it. fn runs at most once: the
//     error is not marked retryable;
//   - context values reach fn. A cancelled context ends the call with an error
//     matching context.Canceled (fn runs at most once);
//   - Run honours ctx. With ctx already cancelled, it returns without waiting.
//     With a deadline, it returns by that deadline. This is checked in a
//     testing/synctest bubble, so a policy that sleeps ignoring ctx is caught
//     without real waiting. Such a policy must build its timers inside the
//     bubble, as newPolicy does;
//   - the Releaser rule. The caller's context may carry a callpath.Releaser. A
//     context the policy hands down is then still live when Run returns. It ends
//     only when the caller releases it (an HTTP body is read after the call);
//   - Run is safe for concurrent use from many goroutines;
//   - events, if any, carry a valid kind and the pipeline's name;
//   - no goroutine is left behind.
package policytest
