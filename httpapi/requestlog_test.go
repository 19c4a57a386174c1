package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// The request log names the path as it was asked, percent-encoding kept:
// an encoded slash's refusal logged as /device/a/b would name a path that
// was not asked (and that a route may serve).
func TestRequestLogKeepsTheAskedPath(t *testing.T) {
	t.Parallel()
	n := newOutageNode(t)
	if status, _ := n.get(t, "/device/a%2Fb"); status != http.StatusNotFound {
		t.Fatalf("GET /device/a%%2Fb: %d, want 404", status)
	}
	var line string
	for _, l := range strings.Split(n.logs.String(), "\n") {
		if strings.Contains(l, "msg=request") && strings.Contains(l, "status=404") {
			line = l
		}
	}
	if !strings.Contains(line, "path=/device/a%2Fb ") {
		t.Errorf("the request's log line %q, want path=/device/a%%2Fb", line)
	}
}
