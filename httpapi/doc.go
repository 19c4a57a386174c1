// Package httpapi is simrelay's REST API on Echo: one route table (routes.go),
// one file per resource, the auth and rate-limit middleware, one error
// renderer that gives every non-2xx answer the contract's body, and the
// OpenAPI 3.1 document kept in step with the table by a test.
package httpapi
