package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/storetest"
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
	if storetest.Postgres() {
		t.Skip("the version does not depend on the store: this test runs once, in the first pass of make test")
	}
	bin := versionedBinary(t)
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(strings.TrimPrefix(string(out), "simrelay "))
	if version != versionedRelease {
		t.Fatalf("simrelay version: %q, want %q", version, versionedRelease)
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

// versionedRelease is the version versionedBinary is given at link time.
const versionedRelease = "v0.0.0-older"

// versioned is the binary versionedBinary builds.
var versioned testBuild

// versionedBinary compiles simrelay once per test run with its version set
// at link time (-X main.version=versionedRelease), as a release is built:
// the tests of what a build says of its version share it.
func versionedBinary(t *testing.T) string {
	t.Helper()
	return versioned.make(t, nil, "-ldflags", "-w -X main.version="+versionedRelease)
}
