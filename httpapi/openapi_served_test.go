package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestServedOpenAPIIsTheDocumentWithItsServer: the document a server
// serves, joined from the parts written once (openAPIServed), is byte for
// byte what parsing the embedded document and writing it again with the
// server's URL as its one server makes, for any URL.
func TestServedOpenAPIIsTheDocumentWithItsServer(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"http://127.0.0.1:8080", "https://sms.example.com/", `https://x.test/"quoted"\u0000`} {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
			t.Fatal(err)
		}
		servers, err := json.Marshal([]map[string]string{{"url": strings.TrimSuffix(url, "/"), "description": "This server (its `--public-url`)."}})
		if err != nil {
			t.Fatal(err)
		}
		doc["servers"] = servers
		want, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := servedOpenAPI(url)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the served document (%d bytes) differs from the embedded one with its server (%d bytes)", url, len(got), len(want))
		}
	}
	if got, err := servedOpenAPI(""); err != nil || !bytes.Equal(got, openAPIDoc) {
		t.Errorf("without a public URL: %d bytes, %v; want the embedded document as it is", len(got), err)
	}
}
