package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/problem"
)

// openAPIMethods are the operation keys of an OpenAPI 3.1 path item.
var openAPIMethods = map[string]bool{
	"get": true, "put": true, "post": true, "delete": true, "options": true, "head": true, "patch": true, "trace": true,
}

// openAPIPathItemFields are the other fixed fields a path item may hold.
var openAPIPathItemFields = map[string]bool{"$ref": true, "summary": true, "description": true, "servers": true, "parameters": true}

// loadOpenAPI parses the embedded document; every test below starts from it.
func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	return doc
}

// openAPIOperations returns "METHOD /path" -> operation object of the document,
// reporting path items with fields that are neither operations nor path-item fields.
func openAPIOperations(t *testing.T, doc map[string]any) map[string]map[string]any {
	t.Helper()
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		t.Fatalf("openapi.json: paths is missing or not an object")
	}
	ops := make(map[string]map[string]any)
	for path, v := range paths {
		item, ok := v.(map[string]any)
		if !ok {
			t.Errorf("openapi.json: path item %s is not an object", path)
			continue
		}
		for key, v := range item {
			if !openAPIMethods[key] {
				if !openAPIPathItemFields[key] && !strings.HasPrefix(key, "x-") {
					t.Errorf("openapi.json: path item %s has unknown field %q", path, key)
				}
				continue
			}
			op, ok := v.(map[string]any)
			if !ok {
				t.Errorf("openapi.json: %s %s is not an object", strings.ToUpper(key), path)
				continue
			}
			ops[strings.ToUpper(key)+" "+path] = op
		}
	}
	return ops
}

func newOpenAPITestServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(Config{
		GeneralRate: pacing.Rate{Limit: 100, Window: time.Minute},
		AuthRate:    pacing.Rate{Limit: 15, Window: 15 * time.Minute},
	}, Deps{
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
		Gatherer: prometheus.NewRegistry(),
		Now:      time.Now,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// TestOpenAPIMatchesRoutes keeps the document and the route table in step:
// every JSON route is documented and every documented operation is routed.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	s := newOpenAPITestServer(t)
	routes := make(map[string]bool)
	consoleSeen := make(map[string]bool)
	for _, key := range s.RouteKeys() {
		method, path, ok := strings.Cut(key, " ")
		if !ok || method == "" || !strings.HasPrefix(path, "/") {
			t.Errorf("RouteKeys: malformed key %q", key)
			continue
		}
		if consolePaths[path] {
			consoleSeen[path] = true
			continue
		}
		routes[key] = true // a map: duplicates count once
	}
	if len(routes) == 0 {
		t.Fatal("RouteKeys returned no JSON API route")
	}
	for _, p := range slices.Sorted(maps.Keys(consolePaths)) {
		if !consoleSeen[p] {
			t.Errorf("consolePaths lists %s, which has no route", p)
		}
	}

	ops := openAPIOperations(t, loadOpenAPI(t))
	for _, key := range slices.Sorted(maps.Keys(routes)) {
		if ops[key] == nil {
			t.Errorf("route %s has no operation in openapi.json", key)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(ops)) {
		if !routes[key] {
			t.Errorf("openapi.json documents %s, which has no route", key)
		}
	}
}

// TestOpenAPIDocument checks the document's own consistency.
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1") {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	ops := openAPIOperations(t, doc)
	if len(ops) == 0 {
		t.Fatal("openapi.json has no operation")
	}
	paths := doc["paths"].(map[string]any)
	ids := make(map[string]string)
	for _, key := range slices.Sorted(maps.Keys(ops)) {
		op := ops[key]
		id, _ := op["operationId"].(string)
		switch {
		case id == "":
			t.Errorf("%s has no operationId", key)
		case ids[id] != "":
			t.Errorf("operationId %q is used by both %s and %s", id, ids[id], key)
		default:
			ids[id] = key
		}

		responses, _ := op["responses"].(map[string]any)
		success := false
		for status, r := range responses {
			if len(status) == 3 && status[0] == '2' {
				success = true
			}
			// A WebSocket route succeeds by switching protocols: its 101 counts,
			// but only when it declares the Upgrade and Connection headers of one.
			if status == "101" && isProtocolSwitch(doc, r) {
				success = true
			}
		}
		if !success {
			t.Errorf("%s has no 2xx response (nor a 101 protocol switch)", key)
		}
		// A server fault can meet every route but the probes, which answer
		// as they are: each lists the one 500 answer, as the others do; and
		// so can a store that takes nothing now (a full disk, a database
		// out of reach), whose 503 each lists too.
		tags, _ := op["tags"].([]any)
		if !slices.Contains(tags, any("Probes")) {
			if r, _ := responses["500"].(map[string]any); r["$ref"] != "#/components/responses/InternalError" {
				t.Errorf("%s does not list 500 as #/components/responses/InternalError", key)
			}
			if _, ok := responses["503"].(map[string]any); !ok {
				t.Errorf("%s does not list 503 (#/components/responses/ServiceUnavailable)", key)
			}
		}

		// Every {name} of the path template is declared as a path parameter.
		_, path, _ := strings.Cut(key, " ")
		declared := make(map[string]bool)
		item := paths[path].(map[string]any)
		for _, list := range []any{item["parameters"], op["parameters"]} {
			params, _ := list.([]any)
			for _, p := range params {
				pm, _ := resolveOpenAPIRef(doc, p).(map[string]any)
				if in, _ := pm["in"].(string); in == "path" {
					name, _ := pm["name"].(string)
					declared[name] = true
				}
			}
		}
		for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(path, -1) {
			if !declared[m[1]] {
				t.Errorf("%s: path parameter %q is not declared", key, m[1])
			}
		}
	}

	refs := 0
	walkOpenAPI(doc, "#", func(where, ref string) {
		refs++
		if !strings.HasPrefix(ref, "#/components/") {
			t.Errorf("%s: $ref %q does not point into #/components/", where, ref)
			return
		}
		if _, ok := lookupOpenAPIPointer(doc, ref); !ok {
			t.Errorf("%s: $ref %q does not resolve", where, ref)
		}
	})
	if refs == 0 {
		t.Error("openapi.json has no $ref at all; the walk found nothing to check")
	}
}

// TestOpenAPIErrorCodes keeps the Error schema's enum equal to the catalog,
// and the error examples of every operation under the status of their code.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	enum, ok := lookupOpenAPIPointer(doc, "#/components/schemas/Error/properties/error/enum")
	list, _ := enum.([]any)
	if !ok || len(list) == 0 {
		t.Fatal("openapi.json: components.schemas.Error.properties.error.enum is missing or empty")
	}
	documented := make(map[string]bool)
	for _, v := range list {
		code, _ := v.(string)
		if documented[code] {
			t.Errorf("Error enum lists %q twice", code)
		}
		documented[code] = true
	}
	catalog := make(map[string]bool)
	for _, c := range problem.Codes() {
		catalog[string(c)] = true
	}
	for _, code := range slices.Sorted(maps.Keys(catalog)) {
		if !documented[code] {
			t.Errorf("error code %q (problem.Codes) is missing from the Error schema's enum", code)
		}
	}
	for _, code := range slices.Sorted(maps.Keys(documented)) {
		if !catalog[code] {
			t.Errorf("the Error schema's enum lists %q, which problem.Codes does not have", code)
		}
	}

	ops := openAPIOperations(t, doc)
	for _, key := range slices.Sorted(maps.Keys(ops)) {
		responses, _ := ops[key]["responses"].(map[string]any)
		for status, r := range responses {
			want, err := strconv.Atoi(status)
			if err != nil {
				continue
			}
			resp, _ := resolveOpenAPIRef(doc, r).(map[string]any)
			content, _ := resp["content"].(map[string]any)
			media, _ := content["application/json"].(map[string]any)
			examples, _ := media["examples"].(map[string]any)
			for name, ex := range examples {
				exm, _ := resolveOpenAPIRef(doc, ex).(map[string]any)
				value, _ := exm["value"].(map[string]any)
				code, ok := value["error"].(string)
				if !ok {
					continue
				}
				if !catalog[code] {
					t.Errorf("%s %s: example %q has unknown error code %q", key, status, name, code)
				} else if got := problem.Code(code).Status(); got != want {
					t.Errorf("%s %s: example %q has code %q, which answers %d", key, status, name, code, got)
				}
			}
		}
	}
}

// isProtocolSwitch reports whether a response object describes a protocol
// switch: it declares both the Upgrade and the Connection header.
func isProtocolSwitch(doc map[string]any, r any) bool {
	resp, _ := resolveOpenAPIRef(doc, r).(map[string]any)
	headers, _ := resp["headers"].(map[string]any)
	_, upgrade := headers["Upgrade"]
	_, connection := headers["Connection"]
	return upgrade && connection
}

// walkOpenAPI calls f for every $ref string in the tree, with the JSON pointer of its object.
func walkOpenAPI(node any, where string, f func(where, ref string)) {
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			if k == "$ref" {
				if ref, ok := v.(string); ok {
					f(where, ref)
					continue
				}
			}
			walkOpenAPI(v, where+"/"+escapeOpenAPIPointer(k), f)
		}
	case []any:
		for i, v := range n {
			walkOpenAPI(v, where+"/"+strconv.Itoa(i), f)
		}
	}
}

func escapeOpenAPIPointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// lookupOpenAPIPointer resolves a local reference such as #/components/schemas/User.
func lookupOpenAPIPointer(doc map[string]any, ref string) (any, bool) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var node any = doc
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := node.(type) {
		case map[string]any:
			v, ok := n[tok]
			if !ok {
				return nil, false
			}
			node = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			node = n[i]
		default:
			return nil, false
		}
	}
	return node, true
}

// resolveOpenAPIRef follows $ref (a few levels at most) and returns the target.
func resolveOpenAPIRef(doc map[string]any, node any) any {
	for range 8 {
		m, ok := node.(map[string]any)
		if !ok {
			return node
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return node
		}
		if node, ok = lookupOpenAPIPointer(doc, ref); !ok {
			return nil
		}
	}
	return node
}
