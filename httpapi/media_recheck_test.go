package httpapi_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/store"
)

// TestUploadCredentialCheckedOnceItsBodyIsIn: a device's upload is
// authorised again once its body has arrived, as every other route's body
// is (readBody): a device whose token was replaced (paired again), that was
// disabled or deleted while its file was still arriving stores nothing and
// is refused as an upload sent after the change is, and its spooled file
// is gone.
func TestUploadCredentialCheckedOnceItsBodyIsIn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		change func(e *env, apiKey, fingerprint string)
		status int
		code   string
	}{
		{"paired again", func(e *env, apiKey, fp string) { e.pairPhone(apiKey, fp) }, http.StatusUnauthorized, "unauthorized"},
		{"disabled", func(e *env, apiKey, fp string) {
			e.want(e.do(call{method: "PATCH", path: "/device/" + fp, token: apiKey, body: map[string]any{"status": "disabled"}}), http.StatusOK, "")
		}, http.StatusForbidden, "device_disabled"},
		{"deleted", func(e *env, apiKey, fp string) {
			e.want(e.do(call{method: "DELETE", path: "/device/delete/" + fp, token: apiKey}), http.StatusOK, "")
		}, http.StatusUnauthorized, "unauthorized"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, roomy)
			a := e.newCompany("Acme", "owner@acme.test")
			reg := e.pairPhone(a.apiKey, "agent-a")
			dev, err := e.store.Device("agent-a")
			if err != nil {
				t.Fatal(err)
			}
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
			req, err := http.NewRequest("POST", e.url+"/device/media?key=held/0", pr)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+reg.DeviceToken)
			req.Header.Set("Content-Type", "image/png")
			type answer struct {
				status int
				body   map[string]any
				err    error
			}
			got := make(chan answer, 1)
			go func() {
				res, err := testhttp.Client.Do(req)
				if err != nil {
					got <- answer{err: err}
					return
				}
				defer res.Body.Close()
				var body map[string]any
				err = json.NewDecoder(res.Body).Decode(&body)
				got <- answer{status: res.StatusCode, body: body, err: err}
			}()
			if _, err := pw.Write(pngBytes[:100]); err != nil {
				t.Fatal(err)
			}
			e.eventually("the upload is under way", func() bool {
				spooled, _ := os.ReadDir(e.uploads)
				return len(spooled) == 1
			})
			c.change(e, a.apiKey, "agent-a")
			if _, err := pw.Write(pngBytes[100:]); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			r := <-got
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.status != c.status || r.body["error"] != c.code {
				t.Fatalf("answered %d %v, want %d %s", r.status, r.body, c.status, c.code)
			}
			if m, err := e.store.MediaByKey(dev.CompanyID, dev.ID, "held/0"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the refused upload was stored: %+v, %v", m, err)
			}
			if spooled, _ := os.ReadDir(e.uploads); len(spooled) != 0 {
				t.Errorf("the refused upload left %d spooled file(s)", len(spooled))
			}
		})
	}
}
