package web

import (
	"embed"
	"net/http"
)

//go:embed pages/*.html
var pages embed.FS

// Handler serves the console pages. The pages post the token from their
// address to the API only when the user clicks, so a mail scanner that
// prefetches the link spends nothing.
func Handler() http.Handler {
	mux := http.NewServeMux()
	for path, file := range map[string]string{
		"GET /verify-email":   "pages/verify-email.html",
		"GET /reset-password": "pages/reset-password.html",
	} {
		body, err := pages.ReadFile(file)
		if err != nil {
			panic("web: missing embedded page " + file) // caught by the package's tests
		}
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			h := w.Header()
			h.Set("Content-Type", "text/html; charset=utf-8")
			// The token is in the address: never send it on as a Referer, never cache it.
			h.Set("Referrer-Policy", "no-referrer")
			h.Set("Cache-Control", "no-store")
			h.Set("X-Frame-Options", "DENY")
			h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'")
			_, _ = w.Write(body)
		})
	}
	return mux
}
