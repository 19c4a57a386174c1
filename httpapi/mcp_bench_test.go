package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/account"
)

// BenchmarkMCPToolsList is what the MCP transport costs one request beyond
// its tool: a stateless session for one tools/list, the eight schemas
// written out, no store.
func BenchmarkMCPToolsList(b *testing.B) {
	s := &Server{deps: Deps{Logger: slog.New(slog.DiscardHandler)}}
	h := s.newMCPHandler(s.newMCPTools())
	ctx := context.WithValue(context.Background(), mcpCallerKey{}, account.Principal{CompanyID: 1, UserID: 1, Role: "admin"})
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Authorization", "Bearer sk_test")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"send_sms"`) {
			b.Fatalf("got %d: %s", w.Code, w.Body)
		}
	}
}
