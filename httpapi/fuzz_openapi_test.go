package httpapi_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The fuzz targets check each 2xx answer against the OpenAPI document's
// schema for that route and status: the JSON types, the required
// properties, enums and the items of arrays, through $ref and anyOf. The
// string formats and bounds are left to the document's own tests.

var fuzzOpenAPI = sync.OnceValues(func() (map[string]any, error) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	return doc, json.Unmarshal(raw, &doc)
})

// checkAnswerSchema fails unless body matches the schema the document
// gives for op (its path as the document writes it, "/pools/{id}") under
// method and status.
func checkAnswerSchema(t testing.TB, method, op string, status int, body any) {
	t.Helper()
	doc, err := fuzzOpenAPI()
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	schema, ok := lookupPath(doc, "paths", op, strings.ToLower(method), "responses", strconv.Itoa(status), "content", "application/json", "schema")
	if !ok {
		t.Fatalf("%s %s answered %d, which the OpenAPI document does not give", method, op, status)
	}
	if err := matchSchema(doc, schema, body, "$"); err != nil {
		t.Fatalf("%s %s answered %d not as the OpenAPI document says: %v", method, op, status, err)
	}
}

func lookupPath(node any, keys ...string) (any, bool) {
	for _, k := range keys {
		m, ok := node.(map[string]any)
		if !ok {
			return nil, false
		}
		if node, ok = m[k]; !ok {
			return nil, false
		}
	}
	return node, true
}

// matchSchema is the subset of JSON Schema (2020-12, as OpenAPI 3.1 uses
// it) that the document's answers use.
func matchSchema(doc map[string]any, schema, v any, at string) error {
	s, ok := schema.(map[string]any)
	if !ok {
		return nil // true, or a schema of no constraint
	}
	if ref, ok := s["$ref"].(string); ok {
		target, ok := lookupPath(doc, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
		if !ok {
			return fmt.Errorf("%s: unresolved %s", at, ref)
		}
		if err := matchSchema(doc, target, v, at); err != nil {
			return err
		}
	}
	if alts, ok := s["anyOf"].([]any); ok {
		var errs []string
		for _, alt := range alts {
			err := matchSchema(doc, alt, v, at)
			if err == nil {
				errs = nil
				break
			}
			errs = append(errs, err.Error())
		}
		if errs != nil {
			return fmt.Errorf("%s: no alternative of anyOf matches: %s", at, strings.Join(errs, "; "))
		}
	}
	if typ, ok := s["type"]; ok && !matchesType(typ, v) {
		return fmt.Errorf("%s: %v is not of type %v", at, v, typ)
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
	}
	switch v := v.(type) {
	case map[string]any:
		if req, ok := s["required"].([]any); ok {
			for _, k := range req {
				if _, ok := v[k.(string)]; !ok {
					return fmt.Errorf("%s: no required %q", at, k)
				}
			}
		}
		props, _ := s["properties"].(map[string]any)
		for k, pv := range v {
			if ps, ok := props[k]; ok {
				if err := matchSchema(doc, ps, pv, at+"."+k); err != nil {
					return err
				}
			}
		}
	case []any:
		for i, item := range v {
			if err := matchSchema(doc, s["items"], item, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// matchesType reports whether v (as encoding/json decodes into any) is of
// the JSON Schema type typ, a name or a list of names.
func matchesType(typ, v any) bool {
	if list, ok := typ.([]any); ok {
		return slices.ContainsFunc(list, func(t any) bool { return matchesType(t, v) })
	}
	switch typ {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	}
	return true
}
