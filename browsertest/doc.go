// Package browsertest checks Backstop's pages in a real browser: headless Chromium,
// driven with github.com/chromedp/chromedp, loads them from servers on 127.0.0.1. It is
// a module of its own so that the browser driver never enters the library's module
// graph. The tests skip, saying why, only when no Chromium can be found; .ci/run
// installs Debian's chromium package first.
package browsertest
