package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// idempotencyKey is the send's Idempotency-Key bound to its route and to
// what it asks.
func idempotencyKey(c echo.Context, in any) store.IdempotencyKey {
	return newIdempotencyKey(c.Request().Header.Get("Idempotency-Key"), c.Path(), in)
}

// newIdempotencyKey binds a client's key to a route and a request. The
// digest is taken of the decoded body, so that a retry whose JSON differs
// in spacing or field order is the same request; the MCP tools pass the
// REST route and body they stand for, so a key means one request whichever
// way it came.
func newIdempotencyKey(key, route string, in any) store.IdempotencyKey {
	k := store.IdempotencyKey{Key: key, Route: route}
	if k.Key == "" {
		return k
	}
	body, _ := json.Marshal(in) // the bodies are plain structs: it cannot fail
	sum := sha256.Sum256(body)
	k.Digest = base64.RawStdEncoding.EncodeToString(sum[:])
	return k
}

// replay answers a send whose key answered before: with that first answer
// when the request is the same (a retry), 422 when the key was used for
// another request, as Stripe does.
func replay(c echo.Context, k store.IdempotencyKey, prior *store.Idempotent) error {
	if err := replayable(k, prior); err != nil {
		return err
	}
	c.Response().Header().Set("Idempotent-Replayed", "true")
	return c.JSONBlob(prior.Status, prior.Body)
}

// replayable says whether a kept answer may answer this request. An answer
// kept before keys had digests replays whatever the body, as it did then.
func replayable(k store.IdempotencyKey, prior *store.Idempotent) error {
	if prior.Digest != "" && prior.Digest != k.Digest {
		return &problem.Error{Code: problem.IdempotencyKeyReused, Field: "Idempotency-Key",
			Message: "This Idempotency-Key was used within the last 24 hours for another request to this route; send a new request with a new key."}
	}
	return nil
}

// answered is a send's answer: the one kept for a retry of the same
// Idempotency-Key (prior), or answer's for m, the message just queued.
func answered(key store.IdempotencyKey, m store.Message, prior *store.Idempotent, answer func(store.Message) (int, []byte)) (sent, error) {
	if prior != nil {
		if err := replayable(key, prior); err != nil {
			return sent{}, err
		}
		return sent{status: prior.Status, body: prior.Body, replayed: true}, nil
	}
	status, body := answer(m)
	return sent{status: status, body: body}, nil
}
