package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
)

// The headers of a delivery.
const (
	HeaderTimestamp = "X-Service-Timestamp" // unix seconds of this attempt
	HeaderSignature = "X-Service-Signature" // sha256=<hex HMAC>
	HeaderEvent     = "X-Service-Event"     // the event type, e.g. sms.received
	HeaderDelivery  = "X-Service-Delivery"  // the delivery id, the same on every retry
	// UserAgent names the sender and the version of the delivery format.
	UserAgent = "simrelay-webhook/1"
)

// SecretPrefix starts every signing secret, so secrets are recognisable in
// code and scanners.
const SecretPrefix = "whsec_"

// secretBytes is the random part of a signing secret (256 bits, as HMAC-SHA256's key size).
const secretBytes = 32

// NewSecret returns a new signing secret: the prefix and 32 random bytes as
// unpadded base64url.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook: new secret: %w", err)
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Sign returns the X-Service-Signature value of body sent at timestamp:
// "sha256=" and the hex HMAC-SHA256 of timestamp + "." + body, keyed with the
// whole secret string, prefix included.
func Sign(secret string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
