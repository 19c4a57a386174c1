package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// The conformance walk holds each answer a client gets, over real HTTP,
// to what the served OpenAPI document says of its route: the status is one
// the operation lists, the body matches the schema given for that status
// (types, required and declared properties, enums and consts, formats,
// patterns and bounds, through $ref, allOf, anyOf and oneOf), and every
// header the response declares required is there. A property the body has
// and the schema does not declare is a failure too: a client generated
// from the document would not see it.

// conformance collects what the walk found, so that one run reports all.
type conformance struct {
	t    *testing.T
	e    *env
	doc  map[string]any
	mu   sync.Mutex
	seen map[string]bool // "METHOD /op status"
}

func newConformance(t *testing.T, e *env) *conformance {
	t.Helper()
	r := e.do(call{method: "GET", path: "/openapi.json"})
	e.want(r, http.StatusOK, "")
	var doc map[string]any
	if err := json.Unmarshal(r.Raw, &doc); err != nil {
		t.Fatal(err)
	}
	return &conformance{t: t, e: e, doc: doc, seen: map[string]bool{}}
}

// check makes the call and holds its answer to the document's operation
// op (the path as the document writes it), answering it.
func (cf *conformance) check(op string, c call) resp {
	cf.t.Helper()
	r := cf.e.do(c)
	cf.hold(c.method, op, r)
	return r
}

// hold holds an answer already made.
func (cf *conformance) hold(method, op string, r resp) {
	cf.t.Helper()
	cf.mu.Lock()
	cf.seen[fmt.Sprintf("%s %s %d", method, op, r.Status)] = true
	cf.mu.Unlock()
	where := fmt.Sprintf("%s %s answered %d", method, op, r.Status)
	operation, ok := lookupPath(cf.doc, "paths", op, strings.ToLower(method))
	if !ok {
		cf.t.Errorf("%s: the document has no such operation", where)
		return
	}
	answer, ok := lookupPath(operation, "responses", strconv.Itoa(r.Status))
	if !ok {
		if answer, ok = lookupPath(operation, "responses", "default"); !ok {
			cf.t.Errorf("%s, a status the document does not list: %s", where, r.Raw)
			return
		}
	}
	answer = cf.resolve(answer)
	headers, _ := lookupPath(answer, "headers")
	hm, _ := headers.(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(hm)) {
		h, _ := cf.resolve(hm[name]).(map[string]any)
		got := r.Header.Values(name)
		if len(got) == 0 {
			if req, _ := h["required"].(bool); req {
				cf.t.Errorf("%s without its required header %s", where, name)
			}
			continue
		}
		var v any = got[0]
		if typ, _ := lookupPath(h, "schema", "type"); typ == "integer" {
			n, err := strconv.ParseInt(got[0], 10, 64)
			if err != nil {
				cf.t.Errorf("%s with header %s %q, not an integer", where, name, got[0])
				continue
			}
			v = float64(n)
		}
		if schema, ok := h["schema"]; ok {
			if err := cf.match(schema, v, name); err != nil {
				cf.t.Errorf("%s with header %s: %v", where, name, err)
			}
		}
	}
	content, _ := lookupPath(answer, "content")
	cm, _ := content.(map[string]any)
	if len(cm) == 0 {
		if len(r.Raw) > 0 && method != http.MethodHead {
			cf.t.Errorf("%s with a body where the document gives none: %.200s", where, r.Raw)
		}
		return
	}
	ct := r.Header.Get("Content-Type")
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	media, ok := cm[mt]
	if !ok {
		// A media range: image/* or */*.
		major, _, _ := strings.Cut(mt, "/")
		if media, ok = cm[major+"/*"]; !ok {
			media, ok = cm["*/*"]
		}
	}
	if !ok {
		cf.t.Errorf("%s with Content-Type %q; the document gives %v", where, ct, slices.Sorted(maps.Keys(cm)))
		return
	}
	if mt != "application/json" {
		return
	}
	schema, ok := lookupPath(media, "schema")
	if !ok {
		return
	}
	var body any
	if err := json.Unmarshal(r.Raw, &body); err != nil {
		cf.t.Errorf("%s with a body that is not JSON: %v", where, err)
		return
	}
	if err := cf.match(schema, body, "$"); err != nil {
		cf.t.Errorf("%s not as the document says: %v\n%.600s", where, err, r.Raw)
	}
	// A refusal's code is one the document shows under that status.
	if obj, ok := body.(map[string]any); ok && r.Status >= 400 {
		code, _ := obj["error"].(string)
		examples, _ := lookupPath(media, "examples")
		em, _ := examples.(map[string]any)
		var codes []string
		for _, ex := range em {
			v, _ := lookupPath(cf.resolve(ex), "value", "error")
			if c, ok := v.(string); ok {
				codes = append(codes, c)
			}
		}
		if len(codes) > 0 && !slices.Contains(codes, code) {
			cf.t.Errorf("%s %s; the document shows %v under %d", where, code, codes, r.Status)
		}
	}
}

// resolve follows $ref.
func (cf *conformance) resolve(n any) any {
	for range 8 {
		m, ok := n.(map[string]any)
		if !ok {
			return n
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return n
		}
		n, _ = lookupPath(cf.doc, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
	}
	return n
}

// flatten is a schema with its $ref and allOf merged into one: the
// constraints of each, and the union of their properties.
func (cf *conformance) flatten(schema any) map[string]any {
	s, ok := schema.(map[string]any)
	if !ok {
		return map[string]any{}
	}
	out := map[string]any{}
	props := map[string]any{}
	var required []any
	parts := []map[string]any{s}
	if ref, ok := s["$ref"].(string); ok {
		target, _ := lookupPath(cf.doc, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
		parts = append(parts, cf.flatten(target))
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, a := range all {
			parts = append(parts, cf.flatten(a))
		}
	}
	for _, p := range parts {
		for k, v := range p {
			switch k {
			case "$ref", "allOf":
			case "properties":
				pm, _ := v.(map[string]any)
				maps.Copy(props, pm)
			case "required":
				r, _ := v.([]any)
				required = append(required, r...)
			default:
				if _, set := out[k]; !set {
					out[k] = v
				}
			}
		}
	}
	if len(props) > 0 {
		out["properties"] = props
	}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

var (
	uuidForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	dateForm = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
)

// match is JSON Schema (2020-12) as far as the document uses it, with
// undeclared properties refused where a schema declares properties.
func (cf *conformance) match(schema, v any, at string) error {
	s := cf.flatten(schema)
	if alts, ok := s["anyOf"].([]any); ok {
		if err := cf.matchOne(alts, v, at, false); err != nil {
			return err
		}
	}
	if alts, ok := s["oneOf"].([]any); ok {
		if err := cf.matchOne(alts, v, at, true); err != nil {
			return err
		}
	}
	if typ, ok := s["type"]; ok && !matchesType(typ, v) {
		return fmt.Errorf("%s: %v is not of type %v", at, v, typ)
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
	}
	if c, ok := s["const"]; ok && fmt.Sprint(c) != fmt.Sprint(v) {
		return fmt.Errorf("%s: %v is not %v", at, v, c)
	}
	switch v := v.(type) {
	case string:
		if f, _ := s["format"].(string); f != "" {
			var bad bool
			switch f {
			case "uuid":
				bad = !uuidForm.MatchString(v) || uuid.Validate(v) != nil
			case "date-time":
				_, err := time.Parse(time.RFC3339Nano, v)
				bad = err != nil
			case "date":
				bad = !dateForm.MatchString(v)
			case "uri":
				bad = !strings.Contains(v, ":")
			}
			if bad {
				return fmt.Errorf("%s: %q is not of format %s", at, v, f)
			}
		}
		if p, ok := s["pattern"].(string); ok {
			if re, err := regexp.Compile(p); err == nil && !re.MatchString(v) {
				return fmt.Errorf("%s: %q does not match %s", at, v, p)
			}
		}
		if n, ok := s["maxLength"].(float64); ok && float64(len([]rune(v))) > n {
			return fmt.Errorf("%s: %q is longer than %v", at, v, n)
		}
		if n, ok := s["minLength"].(float64); ok && float64(len([]rune(v))) < n {
			return fmt.Errorf("%s: %q is shorter than %v", at, v, n)
		}
	case float64:
		if n, ok := s["minimum"].(float64); ok && v < n {
			return fmt.Errorf("%s: %v is below %v", at, v, n)
		}
		if n, ok := s["maximum"].(float64); ok && v > n {
			return fmt.Errorf("%s: %v is above %v", at, v, n)
		}
		if n, ok := s["exclusiveMinimum"].(float64); ok && v <= n {
			return fmt.Errorf("%s: %v is not above %v", at, v, n)
		}
	case map[string]any:
		if req, ok := s["required"].([]any); ok {
			for _, k := range req {
				if _, ok := v[k.(string)]; !ok {
					return fmt.Errorf("%s: no required %q", at, k)
				}
			}
		}
		props, declared := s["properties"].(map[string]any)
		extra, _ := s["additionalProperties"]
		for _, k := range slices.Sorted(maps.Keys(v)) {
			ps, ok := props[k]
			if !ok {
				if declared && extra == nil {
					return fmt.Errorf("%s: property %q is not in the document", at, k)
				}
				if es, ok := extra.(map[string]any); ok {
					ps = es
				} else {
					continue
				}
			}
			if err := cf.match(ps, v[k], at+"."+k); err != nil {
				return err
			}
		}
	case []any:
		if n, ok := s["maxItems"].(float64); ok && float64(len(v)) > n {
			return fmt.Errorf("%s: %d items, more than %v", at, len(v), n)
		}
		if items, ok := s["items"]; ok {
			for i, item := range v {
				if err := cf.match(items, item, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// matchOne holds v to anyOf (one or more alternatives) or oneOf (exactly one).
func (cf *conformance) matchOne(alts []any, v any, at string, exactlyOne bool) error {
	var errs []string
	n := 0
	for _, alt := range alts {
		if err := cf.match(alt, v, at); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		n++
	}
	switch {
	case n == 0:
		return fmt.Errorf("%s: no alternative matches: %s", at, strings.Join(errs, "; "))
	case exactlyOne && n > 1:
		return fmt.Errorf("%s: %d alternatives of oneOf match", at, n)
	}
	return nil
}

// numberString is a JSON number as a path segment.
func numberString(v any) string {
	f, _ := v.(float64)
	if f != math.Trunc(f) {
		return fmt.Sprint(v)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// TestOpenAPIAnswersConform walks every route of the API with a company
// that has each kind of thing (a phone, an agent with a WhatsApp number
// and an iMessage handle, messages both ways, a pool, an opt-out, a
// webhook and its deliveries, a member), success and refusal alike, and
// holds each answer to the served document (conformance.hold).
func TestOpenAPIAnswersConform(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy, withAdminToken)
	cf := newConformance(t, e)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	memberID, member := e.phonesInviteMember(a, "max@acme.test")
	key := a.apiKey
	mid := numberString(memberID)

	// Probes and documents.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json"} {
		cf.check(p, call{method: "GET", path: p})
	}
	cf.check("/admin/backup", call{method: "GET", path: "/admin/backup", token: key})
	cf.check("/admin/backup", call{method: "GET", path: "/admin/backup", token: testAdminToken})

	// Credentials.
	cf.check("/auth/signup", call{method: "POST", path: "/auth/signup", body: signupBody("owner@acme.test", goodPassword)})
	cf.check("/auth/signup", call{method: "POST", path: "/auth/signup", body: map[string]any{}})
	cf.check("/auth/login", call{method: "POST", path: "/auth/login", body: map[string]any{"email": a.email, "password": "wrong-Password-1"}})
	login := cf.check("/auth/login", call{method: "POST", path: "/auth/login", body: map[string]any{"email": a.email, "password": goodPassword}})
	cf.check("/auth/refresh", call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": login.str("refreshToken")}})
	cf.check("/auth/refresh", call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": "nope"}})
	cf.check("/auth/verify-email", call{method: "POST", path: "/auth/verify-email", body: map[string]any{"token": "nope"}})
	cf.check("/auth/forgot-password", call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": "nobody@acme.test"}})
	cf.check("/auth/reset-password", call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": "nope", "password": goodPassword}})

	// Account, users, company.
	cf.check("/account/api-key", call{method: "GET", path: "/account/api-key", token: a.access})
	cf.check("/account/api-key", call{method: "GET", path: "/account/api-key", token: member})
	cf.check("/account/api-key", call{method: "GET", path: "/account/api-key"})
	cf.check("/users/me", call{method: "GET", path: "/users/me", token: member})
	cf.check("/users/me", call{method: "GET", path: "/users/me", token: key})
	cf.check("/users/me", call{method: "PATCH", path: "/users/me", token: member, body: map[string]any{"phone": "+15550100077"}})
	cf.check("/users", call{method: "GET", path: "/users", token: member})
	cf.check("/users", call{method: "POST", path: "/users", token: key, body: map[string]any{"firstName": "Zed", "lastName": "Z", "email": "zed@acme.test", "role": "admin"}})
	cf.check("/users", call{method: "POST", path: "/users", token: key, body: map[string]any{"firstName": "Zed", "lastName": "Z", "email": "zed@acme.test", "role": "admin"}})
	cf.check("/users/{id}", call{method: "PATCH", path: "/users/" + mid, token: key, body: map[string]any{"lastName": "Member"}})
	cf.check("/users/{id}", call{method: "PATCH", path: "/users/" + numberString(b.adminID), token: key, body: map[string]any{"lastName": "X"}})
	cf.check("/users/{id}", call{method: "PATCH", path: "/users/" + numberString(a.adminID), token: a.access, body: map[string]any{"role": "member"}})
	cf.check("/company", call{method: "GET", path: "/company", token: member})
	cf.check("/company", call{method: "PATCH", path: "/company", token: key, body: map[string]any{"city": "Springfield"}})
	cf.check("/company", call{method: "PATCH", path: "/company", token: member, body: map[string]any{"city": "Springfield"}})

	// Devices: a phone that reports its jobs, an agent with a number and a handle.
	pairing := cf.check("/device/pairing", call{method: "POST", path: "/device/pairing", token: member})
	cf.check("/device/pairing/{code}/qr.png", call{method: "GET", path: "/device/pairing/" + pairing.str("pairing_code") + "/qr.png", token: member})
	cf.check("/device/pairing/{code}/qr.png", call{method: "GET", path: "/device/pairing/ABCDEFGH/qr.png", token: member})
	cf.check("/device/register", call{method: "POST", path: "/device/register", body: phonesRegisterBody("ABCDEFGH", "nobody")})
	spare := cf.check("/device/register", call{method: "POST", path: "/device/register", body: phonesRegisterBody(pairing.str("pairing_code"), "cf-spare")})
	cf.check("/device/ws", call{method: "GET", path: "/device/ws", token: "dt_nope"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	link, res, err := websocket.Dial(ctx, e.wsURL(), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + spare.str("device_token")}}})
	cancel()
	if err != nil {
		t.Fatalf("the spare device's link: %v", err)
	}
	cf.hold("GET", "/device/ws", resp{Status: res.StatusCode, Header: res.Header})
	link.CloseNow()
	reg := e.pairPhone(key, "cf-phone")
	vp := e.runPhone(reg, "BOTH", true)
	areg := e.pairPhone(key, "cf-agent")
	ag := e.runAgent(areg, "cf-agent", []string{waNumber}, []string{imHandle}, true)
	breg := e.pairPhone(b.apiKey, "cf-other")
	_ = breg
	cf.check("/chat/devices", call{method: "GET", path: "/chat/devices", token: member})
	cf.check("/device/list", call{method: "GET", path: "/device/list", token: member})
	cf.check("/device/{device_fingerprint}", call{method: "PATCH", path: "/device/cf-phone", token: member, body: map[string]any{"device_name": "Front desk"}})
	cf.check("/device/{device_fingerprint}", call{method: "PATCH", path: "/device/cf-other", token: member, body: map[string]any{"device_name": "x"}})
	cf.check("/device/{device_fingerprint}/caps", call{method: "PUT", path: "/device/cf-phone/caps", token: member, body: map[string]any{"sims": []any{map[string]any{"slot": "SIM1", "per_day": 500}}}})
	cf.check("/device/{device_fingerprint}/caps", call{method: "GET", path: "/device/cf-phone/caps", token: member})
	cf.check("/device/{device_fingerprint}/caps", call{method: "GET", path: "/device/cf-other/caps", token: member})

	// SMS both ways.
	sent := cf.check("/chat/send", call{method: "POST", path: "/chat/send", token: key, body: map[string]any{"device_fingerprint": "cf-phone", "phone": "+15550102000", "message": "hello"},
		header: map[string]string{"Idempotency-Key": "cf-1"}})
	cf.check("/chat/send", call{method: "POST", path: "/chat/send", token: key, body: map[string]any{"device_fingerprint": "cf-phone", "phone": "+15550102000", "message": "hello"},
		header: map[string]string{"Idempotency-Key": "cf-1"}})
	cf.check("/chat/send", call{method: "POST", path: "/chat/send", token: key, body: map[string]any{"device_fingerprint": "cf-phone", "phone": "+15550102000", "message": "other"},
		header: map[string]string{"Idempotency-Key": "cf-1"}})
	cf.check("/chat/send", call{method: "POST", path: "/chat/send", token: key, body: map[string]any{"device_fingerprint": "cf-other", "phone": "+15550102000", "message": "x"}})
	cf.check("/chat/send", call{method: "POST", path: "/chat/send", token: key, body: map[string]any{"device_fingerprint": "cf-phone", "phone": "5550102000", "message": "x"}})
	cf.check("/chat/send", call{method: "POST", path: "/chat/send", token: key, body: `{"device_fingerprint":`})
	sched := cf.check("/chat/send", call{method: "POST", path: "/chat/send", token: key, body: map[string]any{"device_fingerprint": "cf-phone", "phone": "+15550102001", "message": "later",
		"send_at": e.clock.Now().Add(time.Hour).Format(time.RFC3339)}})
	cf.check("/automation/send-sms", call{method: "POST", path: "/automation/send-sms", token: member, body: map[string]any{"device_fingerprint": "cf-phone", "phone": "+15550102000", "message": "alias"}})
	cf.check("/chat/send-bulk", call{method: "POST", path: "/chat/send-bulk", token: key, body: bulkBody("cf-phone", 3)})
	cf.check("/chat/send-bulk", call{method: "POST", path: "/chat/send-bulk", token: key, body: map[string]any{"device_fingerprint": "cf-phone", "messages": []any{map[string]any{"phone": "x", "message": "y"}}}})
	e.waitStatus(key, sent.str("queueId"), "delivered")
	cf.check("/chat/queue/{queueId}", call{method: "GET", path: "/chat/queue/" + sent.str("queueId"), token: member})
	cf.check("/chat/queue/{queueId}", call{method: "GET", path: "/chat/queue/" + sched.str("queueId"), token: member})
	cf.check("/chat/queue/{queueId}", call{method: "GET", path: "/chat/queue/" + sched.str("queueId"), token: b.apiKey})
	cf.check("/chat/queue/{queueId}", call{method: "DELETE", path: "/chat/queue/" + sched.str("queueId"), token: member})
	cf.check("/chat/queue/{queueId}", call{method: "DELETE", path: "/chat/queue/" + sent.str("queueId"), token: member})
	waitAck(t, vp.Receive(proto.Inbound{ClientID: "cf-in-1", From: "+15550102000", Message: "reply", SIMSlot: "SIM1"}))
	cf.check("/chat/messages", call{method: "GET", path: "/chat/messages?device_fingerprint=cf-phone&phone=%2B15550102000&limit=2", token: member})
	cf.check("/chat/messages", call{method: "GET", path: "/chat/messages?device_fingerprint=cf-other&phone=%2B15550102000", token: member})
	cf.check("/chat/messages", call{method: "GET", path: "/chat/messages?device_fingerprint=cf-phone&phone=%2B15550102000&limit=101", token: member})
	cf.check("/chat/conversations", call{method: "GET", path: "/chat/conversations?device_fingerprint=cf-phone", token: member})
	cf.check("/chat/conversations", call{method: "GET", path: "/chat/conversations?device_fingerprint=cf-other", token: member})
	cf.check("/automation/inbound-sms", call{method: "GET", path: "/automation/inbound-sms", token: member})
	cf.check("/automation/inbound-sms", call{method: "GET", path: "/automation/inbound-sms?sim_slot=SIM3", token: member})
	cf.check("/automation/latest-sms", call{method: "GET", path: "/automation/latest-sms", token: member})
	cf.check("/automation/latest-sms", call{method: "GET", path: "/automation/latest-sms", token: b.apiKey})

	// Opt-outs.
	cf.check("/opt-outs", call{method: "POST", path: "/opt-outs", token: member, body: map[string]any{"phone": "+15550109999"}})
	cf.check("/opt-outs", call{method: "POST", path: "/opt-outs", token: member, body: map[string]any{"phone": "+15550109999"}})
	cf.check("/opt-outs", call{method: "GET", path: "/opt-outs", token: member})
	cf.check("/chat/send", call{method: "POST", path: "/chat/send", token: key, body: map[string]any{"device_fingerprint": "cf-phone", "phone": "+15550109999", "message": "x"}})
	cf.check("/opt-outs/{phone}", call{method: "DELETE", path: "/opt-outs/%2B15550109999", token: member})
	cf.check("/opt-outs/{phone}", call{method: "DELETE", path: "/opt-outs/%2B15550109999", token: member})
	cf.check("/opt-outs", call{method: "DELETE", path: "/opt-outs?phone=%2B15550109998", token: member})

	// WhatsApp and iMessage.
	numbers := cf.check("/whatsapp/numbers", call{method: "GET", path: "/whatsapp/numbers", token: member})
	cf.check("/imessage/handles", call{method: "GET", path: "/imessage/handles", token: member})
	wa := e.numberID(key, "whatsapp", waNumber)
	im := e.numberID(key, "imessage", imHandle)
	_ = numbers
	cf.check("/whatsapp/numbers/{number_id}", call{method: "PATCH", path: "/whatsapp/numbers/" + wa, token: member, body: map[string]any{"caps": map[string]any{"per_minute": 6}}})
	cf.check("/whatsapp/numbers/{number_id}", call{method: "PATCH", path: "/whatsapp/numbers/wa_nope", token: member, body: map[string]any{"status": "paused"}})
	cf.check("/imessage/handles/{handle_id}", call{method: "PATCH", path: "/imessage/handles/" + im, token: member, body: map[string]any{"gap_seconds": map[string]any{"min": 1, "max": 2}}})
	ws := cf.check("/whatsapp/send", call{method: "POST", path: "/whatsapp/send", token: key, body: map[string]any{"number_id": wa, "to": "+15550103000", "content": "hi"}, header: map[string]string{"Idempotency-Key": "w-1"}})
	cf.check("/whatsapp/send", call{method: "POST", path: "/whatsapp/send", token: key, body: map[string]any{"number_id": wa, "to": "+15550103000", "content": "hi"}, header: map[string]string{"Idempotency-Key": "w-1"}})
	cf.check("/whatsapp/send", call{method: "POST", path: "/whatsapp/send", token: key, body: map[string]any{"number_id": wa, "to": "+15550103000", "type": "image"}})
	is := cf.check("/imessage/send", call{method: "POST", path: "/imessage/send", token: key, body: map[string]any{"handle_id": im, "to": "bob@example.com", "content": "hi"}})
	cf.check("/imessage/send", call{method: "POST", path: "/imessage/send", token: b.apiKey, body: map[string]any{"handle_id": im, "to": "bob@example.com", "content": "hi"}})
	for i := range 8 {
		r := cf.check("/whatsapp/send", call{method: "POST", path: "/whatsapp/send", token: key, body: map[string]any{"number_id": wa, "to": "+15550103000", "content": fmt.Sprint("n", i)}})
		if r.Status == http.StatusTooManyRequests {
			break
		}
	}
	ag.settle()
	waitAck(t, ag.Receive(proto.Inbound{ClientID: "cf-wa-1", Channel: "whatsapp", From: "+15557654321", To: waNumber, Message: "hi on WhatsApp"}))
	cf.check("/whatsapp/messages/{id}", call{method: "GET", path: "/whatsapp/messages/" + ws.str("id"), token: member})
	cf.check("/whatsapp/messages/{id}", call{method: "GET", path: "/whatsapp/messages/" + ws.str("id"), token: b.apiKey})
	cf.check("/imessage/messages/{id}", call{method: "GET", path: "/imessage/messages/" + is.str("id"), token: member})
	cf.check("/whatsapp/messages", call{method: "GET", path: "/whatsapp/messages?number_id=" + wa + "&limit=3", token: member})
	cf.check("/whatsapp/messages", call{method: "GET", path: "/whatsapp/messages?number_id=" + wa + "&page=0", token: member})
	cf.check("/imessage/messages", call{method: "GET", path: "/imessage/messages?handle_id=" + im, token: member})
	cf.check("/imessage/messages", call{method: "GET", path: "/imessage/messages?handle_id=im_nope", token: member})

	// Pools.
	pool := cf.check("/pools", call{method: "POST", path: "/pools", token: member, body: map[string]any{"name": "cfp", "members": members("cf-phone", "SIM1")}})
	pid := numberString(pool.Body["id"])
	cf.check("/pools", call{method: "POST", path: "/pools", token: member, body: map[string]any{"name": "cfp", "members": members("cf-phone", "SIM1")}})
	cf.check("/pools", call{method: "GET", path: "/pools", token: member})
	cf.check("/pools/{id}", call{method: "GET", path: "/pools/" + pid, token: member})
	cf.check("/pools/{id}", call{method: "GET", path: "/pools/" + pid, token: b.apiKey})
	cf.check("/pools/{id}", call{method: "PATCH", path: "/pools/" + pid, token: member, body: map[string]any{"strategy": "least_loaded"}})
	cf.check("/pools/{id}/members", call{method: "POST", path: "/pools/" + pid + "/members", token: member, body: map[string]any{"device_fingerprint": "cf-phone", "sim_slot": "SIM2"}})
	cf.check("/chat/send", call{method: "POST", path: "/chat/send", token: key, body: map[string]any{"pool": "cfp", "phone": "+15550102002", "message": "pooled"}})
	pooled := cf.check("/automation/send-sms", call{method: "POST", path: "/automation/send-sms", token: key, body: map[string]any{"pool": "cfp", "phone": "+15550102002", "message": "pooled"}})
	_ = pooled
	got := cf.check("/pools/{id}", call{method: "GET", path: "/pools/" + pid, token: member})
	if ms, _ := got.Body["members"].([]any); len(ms) > 1 {
		m, _ := ms[1].(map[string]any)
		cf.check("/pools/{id}/members/{memberId}", call{method: "DELETE", path: "/pools/" + pid + "/members/" + numberString(m["id"]), token: member})
	}
	cf.check("/pools/{id}", call{method: "DELETE", path: "/pools/" + pid, token: member})
	cf.check("/pools/{id}", call{method: "DELETE", path: "/pools/" + pid, token: key})

	// Webhooks.
	cf.check("/webhooks/inbound-sms", call{method: "PUT", path: "/webhooks/inbound-sms", token: key, body: map[string]any{"webhooks": []any{
		map[string]any{"url": rc.URL + "/in", "events": []string{"sms.received", "message.sent"}}}}})
	cf.check("/webhooks/inbound-sms", call{method: "PUT", path: "/webhooks/inbound-sms", token: member, body: map[string]any{"webhooks": []any{}}})
	cf.check("/webhooks/inbound-sms", call{method: "PUT", path: "/webhooks/inbound-sms", token: key, body: map[string]any{"webhooks": []any{map[string]any{"url": "ftp://x"}}}})
	cf.check("/webhooks/inbound-sms", call{method: "GET", path: "/webhooks/inbound-sms", token: member})
	waitAck(t, vp.Receive(proto.Inbound{ClientID: "cf-in-2", From: "+15550102000", Message: "again", SIMSlot: "SIM2"}))
	e.eventually("a delivery is logged", func() bool { return len(e.whLog(key, "")) > 0 })
	cf.check("/webhooks/deliveries", call{method: "GET", path: "/webhooks/deliveries", token: member})
	cf.check("/webhooks/deliveries", call{method: "GET", path: "/webhooks/deliveries?webhook_id=x", token: member})
	cf.check("/webhooks/signing-secret/rotate", call{method: "POST", path: "/webhooks/signing-secret/rotate", token: key})

	// Media.
	up := cf.check("/device/media", call{method: "POST", path: "/device/media?key=cf-1%2F0", token: areg.DeviceToken, body: string(pngBytes), header: map[string]string{"Content-Type": "image/png"}})
	cf.check("/device/media", call{method: "POST", path: "/device/media?key=cf-1%2F0", token: areg.DeviceToken, body: string(pngBytes), header: map[string]string{"Content-Type": "image/png"}})
	cf.check("/device/media", call{method: "POST", path: "/device/media?key=cf-1%2F0", token: key, body: string(pngBytes), header: map[string]string{"Content-Type": "image/png"}})
	cf.check("/media/{id}", call{method: "GET", path: "/media/" + up.str("id"), token: member})
	in := waitAck(t, ag.Receive(proto.Inbound{ClientID: "cf-wa-2", Channel: "whatsapp", From: "+15557654321", To: waNumber, Message: "a photo", Media: []string{up.str("id")}}))
	cf.check("/whatsapp/messages/{id}", call{method: "GET", path: "/whatsapp/messages/" + in.UUID, token: member})
	cf.check("/media/{id}", call{method: "GET", path: "/media/" + up.str("id"), token: member})
	cf.check("/media/{id}", call{method: "GET", path: "/media/" + up.str("id"), token: b.apiKey})
	cf.check("/media/{id}", call{method: "GET", path: "/media/" + up.str("id"), token: member, header: map[string]string{"Range": "bytes=0-9"}})

	// MCP.
	mcpHeaders := map[string]string{"Accept": "application/json, text/event-stream"}
	cf.check("/mcp", call{method: "POST", path: "/mcp", token: member, header: mcpHeaders,
		body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`})
	cf.check("/mcp", call{method: "POST", path: "/mcp", token: member, header: mcpHeaders, body: `[]`})
	// Each tool answers its route's JSON (docs/mcp.md): held to that route's schema.
	tools := []struct {
		name, args, method, op, schema string
	}{
		{"list_devices", `{}`, "GET", "/device/list", ""},
		{"list_pools", `{}`, "GET", "/pools", ""},
		{"list_numbers", `{"channel":"whatsapp"}`, "GET", "/whatsapp/numbers", ""},
		{"list_numbers", `{"channel":"imessage"}`, "GET", "/imessage/handles", ""},
		{"list_conversations", `{"device_fingerprint":"cf-phone"}`, "GET", "/chat/conversations", ""},
		{"read_conversation", `{"device_fingerprint":"cf-phone","phone":"+15550102000","limit":2}`, "GET", "/chat/messages", ""},
		{"latest_inbound", `{"limit":2}`, "", "", "InboundSms"},
		{"message_status", `{"id":"` + sent.str("queueId") + `"}`, "GET", "/chat/queue/{queueId}", ""},
		{"message_status", `{"id":"` + ws.str("id") + `","channel":"whatsapp"}`, "GET", "/whatsapp/messages/{id}", ""},
		{"send_sms", `{"device_fingerprint":"cf-phone","phone":"+15550102003","message":"by tool"}`, "POST", "/chat/send", ""},
		{"send_imessage", `{"handle_id":"` + im + `","to":"bob@example.com","content":"by tool"}`, "POST", "/imessage/send", ""},
	}
	for i, tl := range tools {
		r := e.do(call{method: "POST", path: "/mcp", token: member, header: mcpHeaders,
			body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, i+10, tl.name, tl.args)})
		var rpc struct {
			Result struct {
				Structured any  `json:"structuredContent"`
				IsError    bool `json:"isError"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.Raw, &rpc); err != nil || rpc.Result.IsError || rpc.Result.Structured == nil {
			t.Errorf("MCP %s: %d %s", tl.name, r.Status, r.Raw)
			continue
		}
		var schema any = map[string]any{"type": "object", "required": []any{"messages"}, "properties": map[string]any{
			"messages": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/" + tl.schema}}}}
		if tl.op != "" {
			status := "200"
			if tl.op == "/imessage/send" {
				status = "202"
			}
			schema, _ = lookupPath(cf.doc, "paths", tl.op, strings.ToLower(tl.method), "responses", status)
			schema, _ = lookupPath(cf.resolve(schema), "content", "application/json", "schema")
		}
		if err := cf.match(schema, rpc.Result.Structured, "$"); err != nil {
			t.Errorf("MCP %s answered not as %s %s does: %v", tl.name, tl.method, tl.op, err)
		}
	}

	// Dashboard, analytics, billing, export.
	cf.check("/dashboard/summary", call{method: "GET", path: "/dashboard/summary", token: member})
	cf.check("/analytics", call{method: "GET", path: "/analytics", token: member})
	cf.check("/analytics", call{method: "GET", path: "/analytics?users=" + mid + "&devices=cf-phone", token: member})
	cf.check("/analytics", call{method: "GET", path: "/analytics?from=2026-13-01", token: member})
	cf.check("/analytics/devices", call{method: "GET", path: "/analytics/devices", token: member})
	cf.check("/plans", call{method: "GET", path: "/plans", token: member})
	cf.check("/billing/subscription", call{method: "GET", path: "/billing/subscription", token: member})
	cf.check("/billing/subscribe", call{method: "POST", path: "/billing/subscribe", token: key, body: map[string]any{"plan_id": "starter"}})
	cf.check("/billing/subscribe", call{method: "POST", path: "/billing/subscribe", token: key, body: map[string]any{"plan_id": "nope"}})
	cf.check("/billing/subscribe", call{method: "POST", path: "/billing/subscribe", token: member, body: map[string]any{"plan_id": "pro"}})
	cf.check("/billing/subscription", call{method: "GET", path: "/billing/subscription", token: member})
	cf.check("/billing/portal", call{method: "POST", path: "/billing/portal", token: key})
	cf.check("/billing/stripe/webhook", call{method: "POST", path: "/billing/stripe/webhook", body: `{}`})
	cf.check("/company/export", call{method: "GET", path: "/company/export", token: member})
	// A pool and SIM caps the export carries (pools, sim_caps).
	cf.check("/pools", call{method: "POST", path: "/pools", token: key, body: map[string]any{"name": "cf-kept", "strategy": "sticky", "fallback": "least_loaded",
		"window": map[string]any{"from": "08:00", "to": "20:00", "time_zone": "UTC"}, "members": members("cf-phone", "SIM1", "cf-phone", "SIM2")}})
	cf.check("/company/export", call{method: "GET", path: "/company/export", token: key})

	// Deletions last.
	cf.check("/device/delete/{device_fingerprint}", call{method: "DELETE", path: "/device/delete/cf-phone", token: member})
	cf.check("/device/delete/{device_fingerprint}", call{method: "DELETE", path: "/device/delete/cf-other", token: key})
	cf.check("/device/delete/{device_fingerprint}", call{method: "DELETE", path: "/device/delete/cf-phone", token: key})
	cf.check("/users/{id}", call{method: "DELETE", path: "/users/" + mid, token: member})
	cf.check("/users/{id}", call{method: "DELETE", path: "/users/" + mid, token: key})
	cf.check("/users/{id}", call{method: "DELETE", path: "/users/" + numberString(a.adminID), token: a.access})
	cf.check("/account/api-key/rotate", call{method: "POST", path: "/account/api-key/rotate", token: a.access})
	cf.check("/chat/devices", call{method: "GET", path: "/chat/devices", token: key})
	// The other company closes last: refused, then accepted.
	cf.check("/company", call{method: "DELETE", path: "/company", token: member, body: map[string]any{"confirm": "Acme"}})
	cf.check("/company", call{method: "DELETE", path: "/company", token: key, body: map[string]any{"confirm": "Acme"}})
	cf.check("/company", call{method: "DELETE", path: "/company", token: b.access, body: map[string]any{"confirm": "Acme"}})
	live := func(status string) {
		if _, err := e.store.UpdateSubscription(uint64(b.id), func(sub *store.Subscription) error {
			sub.ProviderSubID, sub.Status = "sub_cf", status
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	live("active")
	cf.check("/company", call{method: "DELETE", path: "/company", token: b.access, body: map[string]any{"confirm": "Other"}})
	live("canceled")
	e.want(cf.check("/company", call{method: "DELETE", path: "/company", token: b.access, body: map[string]any{"confirm": "Other"}}), http.StatusAccepted, "")
	cf.unheld()
}

// unheld fails for each operation of the document the walk held no answer of.
func (cf *conformance) unheld() {
	cf.t.Helper()
	held := map[string]bool{}
	for k := range cf.seen {
		op := k[:strings.LastIndexByte(k, ' ')]
		held[op] = true
	}
	paths, _ := cf.doc["paths"].(map[string]any)
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		item, _ := paths[p].(map[string]any)
		for _, m := range slices.Sorted(maps.Keys(item)) {
			if key := strings.ToUpper(m) + " " + p; !held[key] && m != "parameters" {
				cf.t.Errorf("the walk held no answer of %s", key)
			}
		}
	}
}

// A store that cannot take a write (its data file gone from under the
// running server here; a full disk or a database out of reach alike)
// answers 503 `unavailable` on whichever route wrote: the document lists
// that answer under each of them, as it lists the 500.
func TestOpenAPIListsTheStoreOutage(t *testing.T) {
	storetest.EmbeddedOnly(t, "the embedded store's data file")
	t.Parallel()
	e := newEnv(t, roomy)
	cf := newConformance(t, e)
	a := e.newCompany("Acme", "owner@acme.test")
	_, member := e.phonesInviteMember(a, "max@acme.test")
	e.pairPhone(a.apiKey, "out-phone")
	e.createPool(a.apiKey, map[string]any{"name": "outp", "members": members("out-phone", "SIM1")})
	path := e.store.(interface{ Path() string }).Path()
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Rename(path+".away", path) })

	writes := []struct {
		op string
		c  call
	}{
		{"/auth/login", call{method: "POST", path: "/auth/login", body: map[string]any{"email": a.email, "password": goodPassword}}},
		{"/auth/forgot-password", call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": a.email}}},
		{"/account/api-key/rotate", call{method: "POST", path: "/account/api-key/rotate", token: a.apiKey}},
		{"/users/me", call{method: "PATCH", path: "/users/me", token: member, body: map[string]any{"firstName": "Maxi"}}},
		{"/users", call{method: "POST", path: "/users", token: a.apiKey, body: map[string]any{"firstName": "Zed", "lastName": "Z", "email": "zed@acme.test", "role": "member"}}},
		{"/company", call{method: "PATCH", path: "/company", token: a.apiKey, body: map[string]any{"city": "Springfield"}}},
		{"/device/pairing", call{method: "POST", path: "/device/pairing", token: a.apiKey}},
		{"/device/{device_fingerprint}", call{method: "PATCH", path: "/device/out-phone", token: a.apiKey, body: map[string]any{"device_name": "Desk"}}},
		{"/chat/send", call{method: "POST", path: "/chat/send", token: a.apiKey, body: map[string]any{"device_fingerprint": "out-phone", "phone": "+15550102000", "message": "hi"}}},
		{"/automation/send-sms", call{method: "POST", path: "/automation/send-sms", token: a.apiKey, body: map[string]any{"device_fingerprint": "out-phone", "phone": "+15550102000", "message": "hi"}}},
		{"/chat/send-bulk", call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("out-phone", 2)}},
		{"/opt-outs", call{method: "POST", path: "/opt-outs", token: a.apiKey, body: map[string]any{"phone": "+15550109999"}}},
		{"/pools", call{method: "POST", path: "/pools", token: a.apiKey, body: map[string]any{"name": "outq", "members": members("out-phone", "SIM2")}}},
		{"/webhooks/inbound-sms", call{method: "PUT", path: "/webhooks/inbound-sms", token: a.apiKey, body: map[string]any{"webhooks": []any{}}}},
		{"/webhooks/signing-secret/rotate", call{method: "POST", path: "/webhooks/signing-secret/rotate", token: a.apiKey}},
		{"/billing/subscribe", call{method: "POST", path: "/billing/subscribe", token: a.apiKey, body: map[string]any{"plan_id": "starter"}}},
	}
	for _, w := range writes {
		r := cf.check(w.op, w.c)
		if r.Status != http.StatusServiceUnavailable || r.str("error") != "unavailable" {
			t.Errorf("%s %s with the data file gone: %d %s, want 503 unavailable", w.c.method, w.c.path, r.Status, r.Raw)
		}
		if r.Header.Get("RateLimit-Remaining") == "" || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s with the data file gone: headers %v, want RateLimit-* and Retry-After", w.c.method, w.c.path, r.Header)
		}
	}
}

// Past its rate limit every counted route answers 429 `rate_limited` with
// Retry-After, before its credential, role or body is read: the document
// lists that answer, and its headers, under each.
func TestOpenAPIListsTheRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *httpapi.Config) {
		c.GeneralRate = pacing.Rate{Limit: 3, Window: time.Minute}
		c.AuthRate = pacing.Rate{Limit: 3, Window: time.Minute}
	})
	cf := newConformance(t, e)
	a := e.newCompany("Acme", "owner@acme.test")
	for range 3 {
		e.do(call{method: "GET", path: "/company", token: a.apiKey})
	}
	paths, _ := cf.doc["paths"].(map[string]any)
	params := strings.NewReplacer("{id}", "1", "{code}", "ABCD2345", "{device_fingerprint}", "none", "{queueId}", "none",
		"{number_id}", "wa_none", "{handle_id}", "im_none", "{phone}", "%2B15550100000", "{memberId}", "1")
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		item, _ := paths[p].(map[string]any)
		for _, m := range slices.Sorted(maps.Keys(item)) {
			if m == "parameters" {
				continue
			}
			method := strings.ToUpper(m)
			c := call{method: method, path: params.Replace(p), token: a.apiKey}
			if method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
				c.body = map[string]any{}
			}
			r := cf.check(p, c)
			switch {
			case r.Status == http.StatusTooManyRequests && r.str("error") == "rate_limited":
			case p == "/healthz" || p == "/readyz" || p == "/metrics" || p == "/openapi.json":
			default:
				t.Errorf("%s %s past the limit: %d %s, want 429 rate_limited", method, p, r.Status, r.Raw)
			}
		}
	}
}

// The checks of the request's address meet every route before it reads
// anything else: a query parameter given twice with different values is
// 400 `validation_failed` naming it on each, probes included, and the
// document lists that answer under each.
func TestOpenAPIListsTheAddressChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy, withAdminToken)
	cf := newConformance(t, e)
	a := e.newCompany("Acme", "owner@acme.test")
	paths, _ := cf.doc["paths"].(map[string]any)
	params := strings.NewReplacer("{id}", "1", "{code}", "ABCD2345", "{device_fingerprint}", "none", "{queueId}", "none",
		"{number_id}", "wa_none", "{handle_id}", "im_none", "{phone}", "%2B15550100000", "{memberId}", "1")
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		item, _ := paths[p].(map[string]any)
		for _, m := range slices.Sorted(maps.Keys(item)) {
			if m == "parameters" {
				continue
			}
			method := strings.ToUpper(m)
			c := call{method: method, path: params.Replace(p) + "?dup=1&dup=2", token: a.apiKey}
			if method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
				c.body = map[string]any{}
			}
			r := cf.check(p, c)
			if r.Status != http.StatusBadRequest || r.str("error") != "validation_failed" || r.str("field") != "dup" {
				t.Errorf("%s %s?dup=1&dup=2: %d %s, want 400 validation_failed naming dup", method, p, r.Status, r.Raw)
			}
		}
	}
}

// The answers' optional parts, held as the walk holds the rest: a send
// with a window, a priority and a validity; a failed send with its error;
// a phone's health; an inbound message from a sender that is no number;
// a webhook whose receiver fails (its attempts' errors and next attempts);
// a company's own settings; a plan in its trial.
func TestOpenAPIAnswersConformRich(t *testing.T) {
	t.Parallel()
	failing := webhooktest.NewReceiver(t, true, func(int, *http.Request, http.ResponseWriter) int { return http.StatusInternalServerError })
	e := newWebhookEnv(t, whConfig(failing, time.Hour), roomy)
	cf := newConformance(t, e)
	a := e.newCompany("Acme", "owner@acme.test")
	key := a.apiKey

	e.want(cf.check("/company", call{method: "PATCH", path: "/company", token: key, body: map[string]any{"optOutKeywords": 0, "country": "gb", "state": "Kent", "region": "GB"}}), http.StatusOK, "")
	cf.check("/company", call{method: "GET", path: "/company", token: key})
	cf.check("/webhooks/inbound-sms", call{method: "PUT", path: "/webhooks/inbound-sms", token: key, body: map[string]any{"webhooks": []any{
		map[string]any{"url": failing.URL + "/in", "active": 1, "devices": []string{"rich"}, "sims": []int{0}, "channels": []string{"sms"},
			"events": []string{"sms.received", "message.failed", "device.online", "device.offline"}}}}})

	reg := e.pairPhone(key, "rich")
	battery, signal, charging := 12, 50, true
	hp := e.healthPhone(reg, &proto.Health{Battery: &battery, Charging: &charging, Signal: &signal, Network: "lte",
		SIMs: []proto.SIMHealth{{Slot: "SIM1", Operator: "Acme Mobile"}}})
	cf.check("/company", call{method: "PATCH", path: "/company", token: key, body: map[string]any{"emailDevice": "rich"}})
	cf.check("/device/list", call{method: "GET", path: "/device/list", token: key})
	cf.check("/chat/devices", call{method: "GET", path: "/chat/devices", token: key})
	cf.check("/device/{device_fingerprint}", call{method: "PATCH", path: "/device/rich", token: key, body: map[string]any{"selected_sim": "SIM1", "sms_per_minute": 5}})

	held := cf.check("/chat/send", call{method: "POST", path: "/chat/send", token: key, body: map[string]any{"device_fingerprint": "rich",
		"phone": "+447400123456", "message": "windowed €", "priority": 7, "validity": 3600,
		"window": map[string]any{"days": []string{"sat"}, "from": "23:00", "to": "23:30", "time_zone": "Europe/London"}}})
	cf.check("/chat/queue/{queueId}", call{method: "GET", path: "/chat/queue/" + held.str("queueId"), token: key})
	sent := cf.check("/chat/send", call{method: "POST", path: "/chat/send", token: key, body: map[string]any{"device_fingerprint": "rich",
		"phone": "07400 123457", "message": "to fail", "expires_at": e.clock.Now().Add(2 * time.Hour).Format(time.RFC3339)}})
	qid := sent.str("queueId")
	e.eventually("the phone takes the send", func() bool {
		r := e.do(call{method: "GET", path: "/chat/queue/" + qid, token: key})
		return r.str("status") == "sending"
	})
	hp.Report(qid, proto.StatusFailed, "generic failure")
	e.waitStatus(key, qid, "failed")
	cf.check("/chat/queue/{queueId}", call{method: "GET", path: "/chat/queue/" + qid, token: key})
	waitAck(t, hp.Receive(proto.Inbound{ClientID: "rich-1", From: "BANK", Message: "your code", SIMSlot: "SIM1"}))
	waitAck(t, hp.Receive(proto.Inbound{ClientID: "rich-2", From: "+447400123457", Message: "STOP", SIMSlot: "SIM1"}))
	cf.check("/chat/messages", call{method: "GET", path: "/chat/messages?device_fingerprint=rich&phone=%2B447400123457", token: key})
	cf.check("/chat/messages", call{method: "GET", path: "/chat/messages?device_fingerprint=rich&phone=BANK", token: key})
	cf.check("/chat/messages", call{method: "GET", path: "/chat/messages?device_fingerprint=rich&phone=%2B447400123457&page=9", token: key})
	cf.check("/chat/conversations", call{method: "GET", path: "/chat/conversations?device_fingerprint=rich", token: key})
	cf.check("/automation/inbound-sms", call{method: "GET", path: "/automation/inbound-sms?device_fingerprint=rich&sim_slot=SIM1", token: key})
	cf.check("/automation/latest-sms", call{method: "GET", path: "/automation/latest-sms", token: key})
	cf.check("/opt-outs", call{method: "GET", path: "/opt-outs", token: key})

	e.eventually("a failed attempt is logged", func() bool {
		for _, at := range e.whLog(key, "") {
			if at.State == "pending" && at.NextAttemptAt != nil && at.StatusCode != nil {
				return true
			}
		}
		return false
	})
	cf.check("/webhooks/deliveries", call{method: "GET", path: "/webhooks/deliveries?limit=5", token: key})
	cf.check("/webhooks/inbound-sms", call{method: "GET", path: "/webhooks/inbound-sms", token: key})

	cf.check("/billing/subscribe", call{method: "POST", path: "/billing/subscribe", token: key, body: map[string]any{"plan_id": "pro"}})
	cf.check("/billing/subscription", call{method: "GET", path: "/billing/subscription", token: key})
	cf.check("/dashboard/summary", call{method: "GET", path: "/dashboard/summary", token: key})
	cf.check("/analytics", call{method: "GET", path: "/analytics?devices=rich&from=2026-11-01&to=2026-11-30", token: key})
	cf.check("/analytics/devices", call{method: "GET", path: "/analytics/devices", token: key})
	cf.check("/company/export", call{method: "GET", path: "/company/export", token: key})
	hp.stop()
	cf.check("/device/list", call{method: "GET", path: "/device/list", token: key})
}
