// Package breakerhttp serves the state of Backstop's circuit breakers over HTTP: JSON
// for tools, and a small self-contained HTML page for people, from which an operator
// may force a breaker open or reset it. It lives apart from package breaker so that a
// breaker's users link neither net/http nor html/template.
//
// # Security
//
// The handler defends its buttons against other sites: cross-origin POSTs are refused
// (http.CrossOriginProtection, against CSRF); every response forbids framing
// (X-Frame-Options: DENY and a Content-Security-Policy with frame-ancestors 'none',
// against clickjacking, where a page on another origin frames
// this one under a decoy and a real click presses "force open"); the policy lets the
// page load nothing but its own stylesheet, run no script and post its form only to
// its own origin; and after an action the browser is sent back to the page it posted
// from by a reference relative to the request's own URL, which can never name another
// host (no open redirect, however the handler is mounted). Authentication is yours to
// add: see [AllowControl].
package breakerhttp
