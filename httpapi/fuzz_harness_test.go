package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/pacing"
)

// The fuzz targets (fuzz_test.go) hold the API to the contract's promise
// on errors: whatever the bytes of a request, the answer is never a 5xx,
// every refusal is a JSON object with a non-empty `error` and `message`
// (and `field` a string where there is one), and an acceptance is the
// JSON object the route documents. Each target builds one server, as the
// other tests do, before fuzzing, and every exec is one real HTTP request
// over loopback.

// fuzzRoomy lifts the rate limits out of reach: a fuzz run sends
// thousands of requests a minute, and a 429 on every exec after the first
// minute would test nothing.
func fuzzRoomy(c *httpapi.Config) {
	c.GeneralRate = pacing.Rate{Limit: math.MaxInt32, Window: time.Minute}
	c.AuthRate = pacing.Rate{Limit: math.MaxInt32, Window: time.Minute}
}

// fuzzEnv is one server with a company, its API key, its admin's access
// token and a paired phone ("fz-phone", SIMs SIM1 and SIM2) in a pool
// ("fz-pool").
type fuzzEnv struct {
	*env
	key, access string
	poolID      string
}

func newFuzzEnv(f *testing.F, opts ...envOption) *fuzzEnv {
	f.Helper()
	e := newEnv(f, append([]envOption{fuzzRoomy}, opts...)...)
	a := e.newCompany("Fuzz", "owner@fuzz.test")
	e.pairPhone(a.apiKey, "fz-phone")
	p := e.createPool(a.apiKey, map[string]any{"name": "fz-pool", "members": members("fz-phone", "SIM1")})
	return &fuzzEnv{env: e, key: a.apiKey, access: a.access, poolID: strconv.FormatFloat(p.Body["id"].(float64), 'f', -1, 64)}
}

// fuzzReq is one request of an exec; body is sent as it is. op is the
// route's path as the OpenAPI document writes it ("/pools/{id}"): a 2xx
// answer is checked against the document's schema for it.
type fuzzReq struct {
	method, path, op string
	body             []byte
	header           map[string]string
	// multi are headers sent with every value given, in order, in place
	// of the ones set before (a duplicated Content-Type); none: none sent.
	multi map[string][]string
	// page: the answer is the console's HTML, for a person; only its
	// status is held to the promise (never a 5xx).
	page bool
}

// send makes the request and checks the answer's shape: never a 5xx, a
// refusal in the contract's error body. It answers the status and, for a
// 2xx with a body, the decoded JSON object. A header value the client
// itself cannot send (a line break, a control byte) skips the exec: the
// server never sees it.
func (fe *fuzzEnv) send(t *testing.T, r fuzzReq) (int, map[string]any) {
	t.Helper()
	status, obj, _ := fe.exchange(t, r)
	return status, obj
}

// exchange is send, answering the raw body as well.
func (fe *fuzzEnv) exchange(t testing.TB, r fuzzReq) (int, map[string]any, []byte) {
	t.Helper()
	for _, v := range r.header {
		if !sendableHeader(v) {
			t.Skip("header value the client cannot send")
		}
	}
	for _, vs := range r.multi {
		for _, v := range vs {
			if !sendableHeader(v) {
				t.Skip("header value the client cannot send")
			}
		}
	}
	req, err := http.NewRequest(r.method, fe.url+r.path, bytes.NewReader(r.body))
	if err != nil {
		t.Skipf("request the client cannot make: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+fe.key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	for k, vs := range r.multi {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", r.method, r.path, err)
	}
	if res.StatusCode >= 500 {
		t.Fatalf("%s %s %q: status %d: %s", r.method, r.path, r.body, res.StatusCode, raw)
	}
	if r.page {
		return res.StatusCode, nil, raw
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		checkErrorBody(t, r, res, raw)
		return res.StatusCode, nil, raw
	}
	if len(raw) == 0 {
		return res.StatusCode, nil, raw
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		t.Fatalf("%s %s %q: status %d, body not a JSON object (%v): %s", r.method, r.path, r.body, res.StatusCode, err, raw)
	}
	if r.op != "" {
		checkAnswerSchema(t, r.method, r.op, res.StatusCode, obj)
	}
	return res.StatusCode, obj, raw
}

// checkErrorBody fails unless raw is the contract's error body.
func checkErrorBody(t testing.TB, r fuzzReq, res *http.Response, raw []byte) {
	t.Helper()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s %q: status %d with Content-Type %q: %s", r.method, r.path, r.body, res.StatusCode, ct, raw)
	}
	var e struct {
		Error   *string `json:"error"`
		Message *string `json:"message"`
		Field   any     `json:"field"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("%s %s %q: status %d, error body not JSON (%v): %s", r.method, r.path, r.body, res.StatusCode, err, raw)
	}
	if e.Error == nil || *e.Error == "" || e.Message == nil || *e.Message == "" {
		t.Fatalf("%s %s %q: status %d, error body without error or message: %s", r.method, r.path, r.body, res.StatusCode, raw)
	}
	if e.Field != nil {
		if s, ok := e.Field.(string); !ok || s == "" {
			t.Fatalf("%s %s %q: status %d, field not a non-empty string: %s", r.method, r.path, r.body, res.StatusCode, raw)
		}
	}
}

// wantString fails unless obj[key] is a non-empty string, and answers it.
func wantString(t *testing.T, obj map[string]any, key string) string {
	t.Helper()
	s, ok := obj[key].(string)
	if !ok || s == "" {
		t.Fatalf("answer without a %q string: %v", key, obj)
	}
	return s
}

// wantID fails unless obj[key] is an id (the API's ids are positive
// integers or non-empty strings), and answers it as a path segment.
func wantID(t *testing.T, obj map[string]any, key string) string {
	t.Helper()
	switch v := obj[key].(type) {
	case float64:
		if v >= 1 && v == math.Trunc(v) {
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
	case string:
		if v != "" {
			return v
		}
	}
	t.Fatalf("answer without an id %q: %v", key, obj)
	return ""
}

// sendableHeader reports whether Go's client sends v as a header value
// (net/http refuses control bytes other than tab).
func sendableHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// edgeBodies are the bodies every target is seeded with beside its valid
// ones: JSON's odd corners and bytes that are not JSON at all.
func edgeBodies() []string {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	deepObj := strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)
	return []string{
		``, `null`, `[]`, `{}`, `"x"`, `0`, `-0`, `1e400`, `{`, `}`, `{"a":1}{"b":2}`,
		"\xef\xbb\xbf{}",       // a BOM before the object
		"{\"a\":\"\xff\xfe\"}", // invalid UTF-8 in a string
		"{\"a\":\"\x00\"}",     // a raw NUL in a string
		`{"a":"\u0000"}`, `{"a":"\ud800"}`, `{"a":"\udfff\ud800"}`,
		deep, deepObj, `[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]`,
	}
}

// edgeValues are values a field is seeded with, written as JSON.
var edgeValues = []string{
	`null`, `true`, `-0`, `1e400`, `-1e400`, `9223372036854775808`, `-9223372036854775809`, `1.5`, `0.0000001`,
	`""`, `" "`, `"\u0000"`, `"\ud800"`, `"\ufeff"`, `[]`, `[[[]]]`, `{}`, `{"":{}}`, `"` + strings.Repeat("x", 5000) + `"`,
}

// withField is body (a JSON object) with key set to the raw JSON value v,
// written after the other fields: a duplicate key when body has it.
func withField(body, key, v string) string {
	k, _ := json.Marshal(key)
	inner := strings.TrimSuffix(strings.TrimSpace(body), "}")
	if strings.TrimSpace(inner) == "{" {
		return inner + string(k) + ":" + v + "}"
	}
	return inner + "," + string(k) + ":" + v + "}"
}

// addBodies seeds f with each body (valid ones, edge bodies, and each
// valid body's fields set to each edge value), through add.
func addBodies(valid []string, fields []string, add func(body string)) {
	for _, b := range valid {
		add(b)
	}
	for _, b := range edgeBodies() {
		add(b)
	}
	if len(valid) == 0 {
		return
	}
	for i, k := range fields {
		// One edge value per field, turning through the list, keeps the
		// seed corpus (run by every plain go test) small.
		add(withField(valid[0], k, edgeValues[i%len(edgeValues)]))
		add(withField(valid[0], k, edgeValues[(i+7)%len(edgeValues)]))
	}
}
