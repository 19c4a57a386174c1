package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/testhttp"
)

// The MCP endpoint's initialize names the server with the version
// `simrelay version` prints (docs/mcp.md): that of a build given its
// version at link time, as a release is.
func TestServeMCPServerInfoVersion(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const release = "v0.0.0-mcp"
	bin := filepath.Join(t.TempDir(), "simrelay-release")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+release, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(strings.TrimPrefix(string(out), "simrelay "))
	if version != release {
		t.Fatalf("simrelay version: %q, want %q", version, release)
	}
	st := newTestStore(t)
	apiKey := createCompany(t, bin, st)
	srv := startServer(t, bin, st)
	req, _ := http.NewRequest("POST", srv.url+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var answer struct {
		Result struct {
			ServerInfo struct{ Name, Version string } `json:"serverInfo"`
		} `json:"result"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(raw, &answer) != nil {
		t.Fatalf("initialize: %d %s", res.StatusCode, raw)
	}
	if info := answer.Result.ServerInfo; info.Name != "simrelay" || version == "" || info.Version != version {
		t.Fatalf("serverInfo %+v, want simrelay %q (simrelay version)", info, version)
	}
}
