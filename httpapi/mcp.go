package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/nulchar"
	"github.com/simrelay/simrelay/problem"
)

// POST /mcp: the API as tools of the Model Context Protocol (streamable
// HTTP transport), for AI agents. The route sits in the routes table like
// any other, so the same middleware authenticates it (API key or access
// token), counts it in the caller's rate-limit window and bounds its body.
//
// The transport runs stateless: every POST is one JSON-RPC message,
// answered in its own response, and the server keeps nothing between
// requests. A client thus costs what its requests cost and no more: no
// session to bound, expire or find again on another node, and each request
// is authenticated and counted afresh. Server-to-client requests
// (sampling, elicitation) are off, which these tools never need.
//
// Each tool runs the service call of the REST route it stands for, with
// the caller's company and role, and answers that route's JSON; a failure
// is a tool error result carrying the route's error body (and its HTTP
// status), so another company's device is not_found here as it is there.

// mcpCallerKey carries the caller, whom the API's middleware
// authenticated, from the Echo handler to the tools.
type mcpCallerKey struct{}

// newMCPHandler is the transport: stateless, plain JSON answers, one server
// for every request. The caller reaches the tools the SDK's way, as the
// request's TokenInfo: RequireBearerToken's verifier checks no token here
// (the API's middleware did, and refused the request otherwise) but hands
// on the caller the middleware found.
func (s *Server) newMCPHandler(tools []mcpTool) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "simrelay", Title: "simrelay SMS, WhatsApp and iMessage gateway", Version: s.cfg.Version},
		// No logger: it would log a session's start and end at Info, and
		// here every request is a session. The transport logs its failures.
		&mcp.ServerOptions{Instructions: mcpInstructions, Capabilities: mcpCapabilities})
	for _, t := range tools {
		srv.AddTool(t.def, s.mcpToolHandler(t))
	}
	transport := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		// The SDK refuses a loopback connection whose Host is not loopback
		// (DNS rebinding against a credential-less local server). Every
		// request here carries a bearer credential that a rebound page does
		// not have, and a reverse proxy in front of the server connects over
		// loopback with the public Host: the check would refuse every one.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        maxBodyBytes,
		Logger:                     s.deps.Logger,
	})
	caller := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, ok := r.Context().Value(mcpCallerKey{}).(account.Principal)
		if !ok {
			return nil, auth.ErrInvalidToken // unreachable: the route needs a credential
		}
		return &auth.TokenInfo{UserID: p.Identity(), Extra: map[string]any{mcpCallerExtra: p}}, nil
	}
	return auth.RequireBearerToken(caller, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(transport)
}

const mcpCallerExtra = "simrelay.principal"

// mcpCapabilities are what the server says it does: tools, whose list never
// changes (every server defines the same). Not logging, the SDK's default,
// deprecated in MCP 2026-07-28: no tool sends a log message, and a
// stateless server has no session whose level a client could set. The
// SDK's default for tools says the list may change, and under
// MCP 2026-07-28 a subscriptions/listen for that change then held its
// request open until the client left (the SDK waits for notifications to
// send): with nothing to notify, the request is answered and ended at
// once, and no request holds a stream open.
var mcpCapabilities = &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: false}}

// mcpToolHandler runs a tool for the request's caller and answers its JSON,
// or its error as a tool error result. A panic in the tool is its call's
// internal error, logged, as a REST route's panic is a 500
// (recoverPanics): the SDK runs a tool in a goroutine of its own, outside
// the request's, where nothing else recovers it and a panic ended the
// whole process.
func (s *Server) mcpToolHandler(t mcpTool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		defer func() {
			if r := recover(); r != nil {
				res, err = s.mcpError(t.def.Name, fmt.Errorf("panic: %v\n%s", r, debug.Stack())), nil
			}
		}()
		var p account.Principal
		if ti := req.Extra.TokenInfo; ti != nil {
			p, _ = ti.Extra[mcpCallerExtra].(account.Principal)
		}
		if p.CompanyID == 0 {
			return nil, errors.New("httpapi: an MCP tool call without its caller") // unreachable, see newMCPHandler
		}
		out, err := t.run(ctx, p, req.Params.Arguments)
		var body []byte
		if err == nil {
			body, err = json.Marshal(out)
		}
		if err != nil {
			return s.mcpError(t.def.Name, err), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(body)}},
			StructuredContent: json.RawMessage(body)}, nil
	}
}

// mcpHeaders are the headers the transport reads, each one value: the
// protocol version, and from MCP 2026-07-28 on the method and the tool's
// name, which gateways route and filter on and the transport holds to the
// body. Given in two lines, the transport reads the first (Header.Get).
var mcpHeaders = []string{"MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"}

// mcp serves one MCP message.
func (s *Server) mcp(c echo.Context) error {
	r := c.Request()
	// A header given twice with different values is refused, as
	// Content-Type is (refuseRepeated): the transport checked the first
	// Mcp-Name against the body while a gateway in front may have gone by
	// the other, and a first MCP-Protocol-Version older than 2026-07-28
	// turned that check off for a second that asked for it.
	for _, h := range mcpHeaders {
		if nulchar.Differ(r.Header.Values(h)) {
			return problem.Invalid(h, "is given in more than one header, with different values; send one")
		}
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType)); mt != echo.MIMEApplicationJSON {
		return problem.Invalid("Content-Type", "must be application/json: the body is one JSON-RPC message")
	}
	if !accepts(r.Header.Values(echo.HeaderAccept), echo.MIMEApplicationJSON) || !accepts(r.Header.Values(echo.HeaderAccept), "text/event-stream") {
		return problem.Invalid("Accept", "must take both application/json and text/event-stream, as the MCP streamable HTTP transport requires")
	}
	if err := refuseEncoding(r); err != nil {
		return err
	}
	data, err := readBody(c)
	if err != nil {
		return err
	}
	if err := refuseCharset(r, data); err != nil {
		return err
	}
	// One reading finds a body that is no JSON (Unmarshal checks the whole
	// text first, as json.Valid) and the id, which a batch, a string or a
	// number, being no object, does not give. The keys are read as written,
	// as the transport reads them: a struct field took "ID" or "Id" for
	// "id" too, so a second key in another case hid the number it checks.
	var msg map[string]json.RawMessage
	err = json.Unmarshal(data, &msg)
	if _, syntax := errors.AsType[*json.SyntaxError](err); syntax {
		return problem.New(problem.InvalidJSON, "The request body is not valid JSON; send one JSON-RPC message.")
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); t[0] == '[' {
		// A batch would run many tool calls for one count of the rate
		// limit; MCP dropped batches in its 2025-06-18 revision.
		return problem.New(problem.InvalidJSON, "Send one JSON-RPC message per request: batches are not accepted.")
	}
	if err != nil || msg == nil {
		// null, a string, a number or a boolean: the transport answered
		// null as an "empty batch" and the others in its decoder's words.
		return problem.New(problem.InvalidJSON, "The body must be one JSON-RPC message: a JSON object.")
	}
	// A key given twice with different values, anywhere in the message
	// (two methods, two tool names, two values of an argument), is
	// refused: the transport took the last and dropped the others without
	// a word. Keys are compared as written, as the transport reads them.
	if field, ok := repeatedKey(data, false); ok {
		return problem.Invalid(field, repeatedKeyPredicate)
	}
	if err := checkRPCID(msg["id"]); err != nil {
		return err
	}
	// The request runs in one of its company's places (MCPPerCompany),
	// taken once its body is read and checked, held until its answer is
	// written: an answer costs the server several times its size while it
	// is built, and one credential may send as many at once as its rate
	// limit lets it.
	release, err := s.mcpCalls.take(r.Context(), principal(c).CompanyID)
	if err != nil {
		return err
	}
	defer release()
	r.Body = io.NopCloser(bytes.NewReader(data))
	ctx := context.WithValue(r.Context(), mcpCallerKey{}, principal(c))
	w := &transportWriter{w: c.Response()}
	s.mcpHandler.ServeHTTP(w, r.WithContext(ctx))
	return w.refusal()
}

// maxRPCID is the largest number a request id may be: the transport reads a
// numeric id as a float64, which holds every whole number up to 2^53 - 1
// exactly (JavaScript's Number.MAX_SAFE_INTEGER).
const maxRPCID = 1<<53 - 1

// checkRPCID refuses a numeric request id that the answer would not carry
// back as sent: the transport reads it as a float64 and answers its int64
// conversion, so 1.5 was answered as id 1, 9007199254740993 as
// 9007199254740992 and 99999999999999999999 as -9223372036854775808, and
// the client could not match the answer to its request. MCP's ids are
// strings or whole numbers. No id (a notification), or an id of another
// type, is the transport's to refuse.
func checkRPCID(id json.RawMessage) error {
	if len(id) == 0 {
		return nil
	}
	if c := id[0]; c != '-' && (c < '0' || c > '9') {
		return nil
	}
	if v, err := strconv.ParseFloat(string(id), 64); err != nil || v != math.Trunc(v) || math.Abs(v) > maxRPCID {
		return problem.New(problem.InvalidJSON, fmt.Sprintf("The JSON-RPC id %s cannot be answered as sent: give a string or a whole number from -%d to %d.",
			id, maxRPCID, maxRPCID))
	}
	return nil
}

// transportWriter passes the transport's answers through, except its own
// plain-text refusals (an unsupported MCP-Protocol-Version, a message that
// is not a JSON-RPC request), which it keeps so that they leave as the
// contract's error body like every other refusal. JSON-RPC errors, which
// MCP clients read, pass unchanged.
type transportWriter struct {
	w       *echo.Response
	status  int          // a plain-text refusal's status; 0 passes through
	refused bytes.Buffer // its text, the first KiB
}

func (t *transportWriter) Header() http.Header { return t.w.Header() }

func (t *transportWriter) WriteHeader(status int) {
	if status >= 400 && strings.HasPrefix(t.w.Header().Get(echo.HeaderContentType), "text/plain") {
		t.status = status
		t.w.Header().Del(echo.HeaderContentType)
		return
	}
	t.w.WriteHeader(status)
}

func (t *transportWriter) Write(b []byte) (int, error) {
	if t.status != 0 {
		if room := 1024 - t.refused.Len(); room > 0 {
			t.refused.Write(b[:min(len(b), room)])
		}
		return len(b), nil
	}
	return t.w.Write(b)
}

func (t *transportWriter) Flush() {
	if t.status == 0 {
		t.w.Flush()
	}
}

// refusal is the kept refusal as the API's error, nil when there was none.
func (t *transportWriter) refusal() error {
	msg := strings.TrimPrefix(strings.TrimSpace(t.refused.String()), "Bad Request: ")
	switch {
	case t.status == 0:
		return nil
	case t.status >= 500:
		return fmt.Errorf("mcp transport: %d %s", t.status, msg) // logged; a generic answer
	case strings.Contains(msg, "protocol version"):
		return problem.Invalid("MCP-Protocol-Version", msg)
	case t.status == http.StatusBadRequest:
		return problem.New(problem.InvalidJSON, "The body is not a valid MCP message: "+msg)
	}
	codes := map[int]problem.Code{http.StatusUnauthorized: problem.Unauthorized, http.StatusForbidden: problem.Forbidden, http.StatusNotFound: problem.NotFound,
		http.StatusMethodNotAllowed: problem.MethodNotAllowed, http.StatusConflict: problem.Conflict,
		http.StatusRequestEntityTooLarge: problem.PayloadTooLarge}
	if code, ok := codes[t.status]; ok {
		return problem.New(code, msg)
	}
	return &problem.Error{Code: problem.ValidationFailed, Message: msg, HTTPStatus: t.status}
}

// accepts says whether an Accept header takes the media type, as the
// transport reads it: the type itself, its type/* or */*.
func accepts(values []string, mediaType string) bool {
	major, _, _ := strings.Cut(mediaType, "/")
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
			if mt == mediaType || mt == "*/*" || mt == major+"/*" {
				return true
			}
		}
	}
	return false
}

// mcpTool is one tool: its advertised definition and what it runs. run
// gets the arguments as sent and returns the REST route's answer, or its
// error.
type mcpTool struct {
	def *mcp.Tool
	run func(ctx context.Context, p account.Principal, args json.RawMessage) (any, error)
}

// inputSchemas holds each tool argument type's JSON schema, by its
// reflect.Type: written out once per process, not once per server.
var inputSchemas sync.Map

// inputSchema is the JSON schema of In, written out once: jsonschema's own
// marshalling (reflection) was most of a tools/list request
// (BenchmarkMCPToolsList), and every server defines the same tools.
func inputSchema[In any](name string) json.RawMessage {
	key := reflect.TypeFor[In]()
	if raw, ok := inputSchemas.Load(key); ok {
		return raw.(json.RawMessage)
	}
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic("httpapi: MCP tool " + name + ": " + err.Error()) // a programming error, caught by every test
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		panic("httpapi: MCP tool " + name + ": " + err.Error())
	}
	inputSchemas.Store(key, json.RawMessage(raw))
	return raw
}

// tool defines a tool whose arguments are In. Its input schema is In's
// (field descriptions from the jsonschema tags); the arguments are decoded
// as the API decodes a body and checked by the service the route calls, so
// a bad argument is the REST route's validation error, field and all.
func tool[In any](name, title, description string, readOnly bool, run func(ctx context.Context, p account.Principal, in In) (any, error)) mcpTool {
	raw := inputSchema[In](name)
	allowed := schemaProperties(name, raw)
	return mcpTool{
		def: &mcp.Tool{Name: name, Title: title, Description: description, InputSchema: json.RawMessage(raw),
			Annotations: toolAnnotations(title, readOnly)},
		run: func(ctx context.Context, p account.Principal, args json.RawMessage) (any, error) {
			var in In
			if len(args) > 0 && string(args) != "null" {
				// The transport has read the message whole: what is left
				// to be wrong is the arguments, not the request's body.
				if t := bytes.TrimLeft(args, " \t\r\n"); len(t) > 0 && t[0] != '{' {
					return nil, problem.New(problem.InvalidJSON, "The tool's arguments must be a JSON object.")
				}
				if err := knownArguments(name, allowed, args); err != nil {
					return nil, err
				}
				if err := decodeJSON(args, &in); err != nil {
					return nil, err
				}
			}
			return run(ctx, p, in)
		},
	}
}

// toolAnnotations are a tool's hints to a client (docs/mcp.md), each given:
// MCP's defaults for those left out would call a send destructive and a
// read open world. A read changes nothing and reads the company's own
// records: read-only, idempotent, closed world. A send adds a message and
// changes nothing there is (not destructive), reaches a person outside
// (open world), and sends again when called again (not idempotent: only
// its idempotency_key makes a retry answer the first send).
func toolAnnotations(title string, readOnly bool) *mcp.ToolAnnotations {
	destructive, openWorld := false, !readOnly
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: readOnly, DestructiveHint: &destructive,
		IdempotentHint: readOnly, OpenWorldHint: &openWorld}
}

// schemaProperties are the argument names an input schema declares, in its
// order.
func schemaProperties(name string, schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		panic("httpapi: MCP tool " + name + ": " + err.Error()) // a programming error, caught by every test
	}
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// knownArguments refuses an argument the tool's input schema does not
// declare (the schema says additionalProperties: false). Read as a REST
// body's unknown field, it was dropped without a word: an agent that gave
// send_sms the route's validity, expires_at or priority, or wrote sendAt for
// send_at, had its SMS sent at once, without the bound it asked for. Keys are
// compared as written (JSON decoding would take Phone for phone); of several,
// the first in byte order is named.
func knownArguments(tool string, allowed []string, args json.RawMessage) error {
	var got map[string]json.RawMessage
	if err := json.Unmarshal(args, &got); err != nil {
		return nil // not an object: decoding it says why
	}
	var unknown []string
	for k := range got {
		if _, ok := slices.BinarySearch(allowed, k); !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	field := slices.Min(unknown)
	if utf8.RuneCountInString(field) > 64 {
		field = string([]rune(field)[:64]) + "…"
	}
	takes := "takes none"
	if len(allowed) > 0 {
		takes = "takes " + strings.Join(allowed, ", ")
	}
	return problem.Invalid(field, fmt.Sprintf("is not an argument of %s, which %s", tool, takes))
}

const mcpInstructions = "simrelay sends SMS through the company's paired Android phones, and WhatsApp and iMessage " +
	"through its agents. Find a device with list_devices (or a sender pool, which chooses the phone and SIM, with " +
	"list_pools), send with send_sms, find a WhatsApp number or iMessage handle with list_numbers and send from it with " +
	"send_whatsapp or send_imessage, follow a send with message_status, " +
	"and read replies with latest_inbound or read_conversation. Phone numbers are E.164 (+ and 8 to 15 digits). " +
	"A failed call answers the REST API's error body {error, message, field?} with its HTTP status."

// mcpErrorJSON is a failed tool call: the REST error body, its status and,
// for a refusal that ends with time (a cap, a rate), the route's
// Retry-After in seconds, which a tool result has no header for.
type mcpErrorJSON struct {
	*problem.Error
	Status     int `json:"status"`
	RetryAfter int `json:"retry_after,omitempty"`
}

// mcpError turns a tool's failure into the REST route's error, as a tool
// error result: the model reads it and can correct its call.
func (s *Server) mcpError(tool string, err error) *mcp.CallToolResult {
	pe, ok := s.domainProblem(err)
	if !ok {
		s.deps.Logger.Error("MCP tool failed", "tool", tool, "err", err)
		pe = problem.New(problem.Internal, "The server failed to handle the call; it has been logged.")
	}
	out := *pe
	if out.Field == "Idempotency-Key" {
		out = *pe.Refield("idempotency_key") // the tool's name for the header
	}
	body, _ := json.Marshal(mcpErrorJSON{Error: &out, Status: out.Status(), RetryAfter: out.RetryAfter})
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(body)}},
		StructuredContent: json.RawMessage(body)}
}
