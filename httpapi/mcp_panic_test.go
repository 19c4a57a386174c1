package httpapi_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook"
)

// poolsPanic is the store with its pools' read panicking while panics is
// set, as a bug in a read would.
type poolsPanic struct {
	store.Backend
	panics atomic.Bool
}

func (s *poolsPanic) Pools(companyID uint64) ([]store.Pool, error) {
	if s.panics.Load() {
		panic("a bug in the pools' read")
	}
	return s.Backend.Pools(companyID)
}

// A tool that panics fails its call alone, as a REST route that panics is
// a 500 and the server goes on: the SDK runs a tool outside the request's
// goroutine, where the API's recovery does not reach, so the panic ended
// the whole process, every company's requests and phone links with it.
func TestMCPToolPanicFailsTheCallAlone(t *testing.T) {
	t.Parallel()
	st := &poolsPanic{Backend: storetest.OpenWith(t, storetest.Options{})}
	e := newEnvOn(t, st, webhook.Config{}, billing.Config{})
	a := e.newCompany("Acme", "mcp-panic@example.com")
	cs := e.mcpClient(a.apiKey)

	st.panics.Store(true)
	body, isErr := callTool(t, cs, "list_pools", nil)
	wantToolError(t, body, isErr, http.StatusInternalServerError, "internal", "")
	// The REST route it stands for answers the same.
	e.want(e.do(call{method: "GET", path: "/pools", token: a.apiKey}), http.StatusInternalServerError, "internal")

	st.panics.Store(false)
	pools, isErr := callTool(t, cs, "list_pools", nil)
	if list, ok := pools["pools"].([]any); isErr || !ok || len(list) != 0 {
		t.Fatalf("list_pools after the panic: %v", pools)
	}
}
