// Package breakerhttp serves the state of Backstop's circuit breakers over HTTP.
// It serves JSON for tools, and a small self-contained HTML page for people. From
// that page, an operator may force a breaker open or reset it. It lives apart from
// package breaker. So a breaker's users link neither net/http nor html/template.
//
// # Security
//
// The handler defends its buttons against other sites:
//   - Cross-origin POSTs are refused (http.CrossOriginProtection), against CSRF.
//   - Every response forbids framing, against clickjacking. It sends
//     X-Frame-Options: DENY, and a Content-Security-Policy with frame-ancestors
//     'none'. In clickjacking, a page on another origin frames this one under a
//     decoy. A real click then presses "force open".
//   - The policy lets the page load nothing but its own stylesheet. The page runs
//     no script. It posts its form only to its own origin.
//   - After an action, the browser is sent back to the page it posted from. The
//     reference is relative to the request's own URL, so it can never name
//     another host. There is no open redirect, however the handler is mounted.
//
// Authentication is yours to add: see [AllowControl].
package breakerhttp
