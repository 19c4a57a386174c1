// Package web is simrelay's web console: embedded pages served by the same
// binary. Today it holds the two pages that e-mailed links open, which call
// the JSON API from the browser: /verify-email and /reset-password.
package web
