package httpapi

import (
	"strings"
	"testing"
)

// TestConsoleShadowsNoAPIRoute keeps the console in its own space: its
// routes are the root, /console and what is under it, the two pages
// e-mailed links open and the site's icon; no API route lives there.
func TestConsoleShadowsNoAPIRoute(t *testing.T) {
	t.Parallel()
	s := newOpenAPITestServer(t)
	for _, key := range s.RouteKeys() {
		_, path, _ := strings.Cut(key, " ")
		inConsole := path == "/" || path == "/console" || strings.HasPrefix(path, "/console/")
		switch {
		case consolePaths[path] && !inConsole && path != "/verify-email" && path != "/reset-password" && path != "/favicon.ico":
			t.Errorf("console route %s is outside /console", key)
		case !consolePaths[path] && inConsole:
			t.Errorf("API route %s lives in the console's space", key)
		}
	}
}
