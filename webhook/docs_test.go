package webhook

import (
	"encoding/base64"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestDocumentedVector keeps the test vector of docs/webhooks.md true: the
// signer and an independent HMAC both reproduce its signature.
func TestDocumentedVector(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Test vector")
	if !ok {
		t.Fatal("docs/webhooks.md has no Test vector section")
	}
	vec := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		for _, key := range []string{"secret", "timestamp", "body", "signature"} {
			if v, ok := strings.CutPrefix(line, key+":"); ok && vec[key] == "" {
				vec[key] = strings.TrimSpace(v)
			}
		}
	}
	for _, key := range []string{"secret", "timestamp", "body", "signature"} {
		if vec[key] == "" {
			t.Fatalf("the test vector has no %s line", key)
		}
	}
	stamp, err := strconv.ParseInt(vec["timestamp"], 10, 64)
	if err != nil {
		t.Fatalf("timestamp %q: %v", vec["timestamp"], err)
	}
	if got := Sign(vec["secret"], stamp, []byte(vec["body"])); got != vec["signature"] {
		t.Errorf("Sign: got %s, the docs say %s", got, vec["signature"])
	}
	if got := hmacHex(vec["secret"], vec["timestamp"], []byte(vec["body"])); got != vec["signature"] {
		t.Errorf("independent HMAC: got %s, the docs say %s", got, vec["signature"])
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(a, SecretPrefix))
	if !strings.HasPrefix(a, "whsec_") || err != nil || len(raw) != 32 || a == b {
		t.Fatalf("got %q and %q, want two different whsec_ + 32 random bytes in base64url", a, b)
	}
}
