package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/internal/clientgone"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// renderError is Echo's error handler: every failure leaves as the contract's
// error body. Anything that is not a *problem.Error or one of Echo's own
// routing errors is a server fault: logged with its cause, answered generically.
func (s *Server) renderError(err error, c echo.Context) {
	if c.Response().Committed {
		// The answer is under way (a streamed export or backup): the client
		// sees it cut short; the operator must see why.
		s.deps.Logger.Error("request failed after its answer began", "method", c.Request().Method, "route", c.Path(), "err", err)
		return
	}
	if clientgone.Is(c.Request(), err) {
		// The client closed its connection while the request waited (on
		// the store, on a link's last seen): nothing failed here, and
		// nobody reads an answer.
		s.deps.Logger.Debug("request ended by its client", "method", c.Request().Method, "route", c.Path())
		c.Response().WriteHeader(clientgone.Status)
		return
	}
	pe := s.toProblem(err, c)
	if pe.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(pe.RetryAfter))
	}
	// On HEAD too: net/http sends no body for HEAD and gives the answer
	// the Content-Length of the one it dropped, so the headers are GET's.
	_ = c.JSON(pe.Status(), pe)
}

func (s *Server) toProblem(err error, c echo.Context) *problem.Error {
	if pe, ok := s.domainProblem(err); ok {
		return pe
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return problem.Newf(problem.NotFound, "There is no route %s %s.", c.Request().Method, askedPath(c.Request()))
		case http.StatusMethodNotAllowed:
			return problem.Newf(problem.MethodNotAllowed, "The route %s does not take %s.", c.Request().URL.Path, c.Request().Method)
		case http.StatusRequestEntityTooLarge:
			return errTooLarge
		case http.StatusUnauthorized:
			return problem.New(problem.Unauthorized, "The API key or access token is missing, invalid or expired.")
		}
	}
	s.deps.Logger.Error("request failed", "method", c.Request().Method, "route", c.Path(), "err", err)
	return problem.New(problem.Internal, "The server failed to handle the request; it has been logged.")
}

// askedPath is the path a refusal names: the URL's, or for a request
// whose target is no path (CONNECT host:port) the target as sent, so that
// the sentence names something.
func askedPath(r *http.Request) string {
	if r.URL.Path == "" {
		return r.RequestURI
	}
	return r.URL.Path
}

// domainProblem is the client's error that a service's failure stands for;
// false for a server fault.
func (s *Server) domainProblem(err error) (*problem.Error, bool) {
	if pe, ok := problem.As(err); ok {
		return pe, true
	}
	// A store that cannot take the request now (its disk full, its
	// database out of reach) is a state of the server, not of the request:
	// the client may try again, on another node or once the operator has
	// freed space or the database is back. The operator must know requests
	// are refused: PostgreSQL's store keeps no state of a full disk and
	// logs nothing (its /readyz stays ready), and the embedded store says
	// only when it starts and ends.
	if pe, ok := s.refusals.Answer(err, s.deps.Now(), s.deps.Logger); ok {
		return pe, true
	}
	var be *store.BudgetError
	if errors.As(err, &be) {
		wait := be.RetryAfter(s.deps.Now())
		return &problem.Error{Code: problem.StorageBudgetExceeded, RetryAfter: wait,
			Message: fmt.Sprintf("The company has used its storage budget of %s for today (UTC); it renews in %s.", problem.Count(be.Limit, "byte"), problem.Count(wait, "second"))}, true
	}
	return nil, false
}

var errTooLarge = problem.Newf(problem.PayloadTooLarge, "The request body is over the %d MiB limit.", maxBodyBytes>>20)

// maxBodyBytes bounds every request body (the contract's 1 MiB).
const maxBodyBytes = 1 << 20

// readBody reads the request body, at most maxBodyBytes of it (413 above).
// On an authenticated route it then checks the credential again (keyRecheck):
// what the body asks is done only for a caller still entitled once it has
// arrived.
func readBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	data, err := readAllSized(http.MaxBytesReader(c.Response(), r.Body, maxBodyBytes), r.ContentLength)
	if err != nil {
		return nil, bodyError(err)
	}
	if k, ok := c.Get(keyRecheck).(*credentialCheck); ok {
		if err := k.again(); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// readAllSized is io.ReadAll starting from a buffer of the size the body
// announced (Content-Length, up to 4 KiB) and one byte more for the end to
// be read, instead of io.ReadAll's 512 bytes: a send's body of about a
// hundred bytes takes one buffer of its size. What is held before the body
// arrives stays small (a slow client announcing 1 MiB holds 4 KiB, not
// its announced size); a larger body grows the buffer as it comes, as with
// io.ReadAll, and one of unknown length starts at 512 bytes.
func readAllSized(r io.Reader, length int64) ([]byte, error) {
	size := 512
	if length >= 0 {
		size = int(min(length, 4<<10)) + 1
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // room to grow, as io.ReadAll makes it
		}
	}
}

// bodyError is readBody's refusal of a body it could not read. It is a
// function of its own so that errors.As's target is on the heap only for
// such a body, not for every one read.
func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errTooLarge
	}
	return problem.New(problem.InvalidJSON, "The request body could not be read.")
}

// bind decodes the JSON body into v. Unknown fields are ignored; an empty,
// malformed or trailing-garbage body, or one that is no object, is
// invalid_json, a wrong type, a key
// given twice in an object with different values (in any case, as the
// decoding matches a field) or a string holding U+0000 names the field at
// fault, a charset other than
// UTF-8 names Content-Type (refuseCharset), and a content coding names
// Content-Encoding (refuseEncoding).
func bind(c echo.Context, v any) error {
	if err := refuseEncoding(c.Request()); err != nil {
		return err
	}
	data, err := readBody(c)
	if err != nil {
		return err
	}
	if err := refuseCharset(c.Request(), data); err != nil {
		return err
	}
	return decodeJSON(data, v)
}

// decodeJSON is bind's decoding of a JSON object, for the API's bodies and
// the MCP tools' arguments alike.
func decodeJSON(data []byte, v any) error {
	// One JSON value and nothing but spaces after it, as nearly every body
	// is: Unmarshal decodes it as the Decoder below would (the same
	// decoding, the same errors, at the same offsets), without the
	// Decoder's reader, buffer and copy of the body. Unmarshal checks the
	// whole of data before it decodes anything, and answers a
	// *json.SyntaxError, v untouched, for anything else.
	data, err := unmarshalBounded(data, v)
	if _, invalid := err.(*json.SyntaxError); invalid {
		// The Decoder tells an empty body, a broken one and one with
		// something after its value apart.
		dec := json.NewDecoder(bytes.NewReader(data))
		err = dec.Decode(v)
		if err == nil {
			if _, extra := dec.Token(); extra != io.EOF {
				return problem.New(problem.InvalidJSON, "The request body must hold exactly one JSON object.")
			}
		}
	}
	if err == nil {
		// A body of null decodes into a struct as nothing at all: a
		// change that changed nothing, answered 200. It is no object.
		if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == 'n' {
			return problem.New(problem.InvalidJSON, "The request body must be a JSON object.")
		}
		if field, ok := repeatedKey(data, true); ok {
			return problem.Invalid(field, repeatedKeyPredicate)
		}
		if field, ok := nulField(data); ok && holdsNUL(reflect.ValueOf(v)) {
			return problem.Invalid(field, `must not hold the NUL character (\u0000)`)
		}
		return nil
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return problem.New(problem.InvalidJSON, "The request body is empty; send a JSON object.")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return problem.New(problem.InvalidJSON, "The request body is not valid JSON.")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return problem.New(problem.InvalidJSON, "The request body must be a JSON object.")
		}
		// typ.Field drops array indexes (sims.slot); the contract's field is
		// the whole JSON path (sims[1].slot), found again from the offset.
		field := jsonPath(data, typ.Offset)
		if field == "" {
			// A type error inside a change's field (field.UnmarshalJSON)
			// has its path in Field, which the decoder joined to the
			// field's name with a dot, also before an index (members.[1]).
			field = strings.ReplaceAll(typ.Field, ".[", "[")
		}
		if sign, _, _ := overflow(data, typ); sign > 0 {
			if pe, ok := tooBig(typ.Field); ok {
				return pe.Refield(field)
			}
		}
		return problem.Invalid(field, "must be "+jsonKind(typ))
	}
	return problem.New(problem.InvalidJSON, "The request body could not be read as JSON.")
}

// unmarshalBounded is json.Unmarshal of data into v, with each number too
// big for its integer field read as the field's bound (boundNumber), at
// most maxBoundedNumbers of them, and data as so read (its offsets are the
// error's). A *json.SyntaxError leaves v untouched.
func unmarshalBounded(data []byte, v any) ([]byte, error) {
	err := json.Unmarshal(data, v)
	if _, invalid := err.(*json.SyntaxError); invalid {
		return data, err
	}
	for range maxBoundedNumbers {
		bounded, ok := boundNumber(data, err)
		if !ok {
			break
		}
		data = bounded
		err = json.Unmarshal(data, v)
	}
	return data, err
}

// repeatedKeyPredicate is the refusal of a key a body's object gives twice
// with different values (repeatedKey), as the query's parameters are
// refused (refuseRepeated).
const repeatedKeyPredicate = "is given more than once in the body, with different values; give it once"

// unboundedAbove names the integer inputs whose domain takes any value
// from the one given up to the largest int, with the least: a page past
// the last is an empty page, so a number past the largest int, read as
// that int, would be answered as another page than the one asked for.
// Such a number is refused instead, with the range the field takes.
var unboundedAbove = map[string]int{"page": 1}

// tooBig is the refusal of a number past the largest int for an input of
// unboundedAbove, in the sentence of its range, and true; false for any
// other input.
func tooBig(field string) (*problem.Error, bool) {
	least, ok := unboundedAbove[field]
	if !ok {
		return nil, false
	}
	return problem.OutOfRange(field, least, math.MaxInt), true
}

// maxBoundedNumbers bounds how many numbers too big for their fields
// decodeJSON reads as the fields' bounds: each costs a decoding of the
// body again. Past it, a number is refused for its Go type's range.
const maxBoundedNumbers = 8

// overflow is the number of a type error that is too big (+1) or too
// small (-1) for its integer field, in digits (99999999999999999999) or
// not (1e20, -1e20), with the bytes of data it takes; 0 for any other
// error, a fraction in range (2.5) and a negative number for an unsigned
// field among them (wholeNumber says what those take).
func overflow(data []byte, typ *json.UnmarshalTypeError) (sign int, start, end int64) {
	lit, isNumber := strings.CutPrefix(typ.Value, "number ")
	if typ.Type == nil || !isNumber {
		return 0, 0, 0
	}
	kind := typ.Type.Kind()
	signed := kind >= reflect.Int && kind <= reflect.Int64
	if !signed && (kind < reflect.Uint || kind > reflect.Uintptr) {
		return 0, 0, 0
	}
	// The decoder's offset is where the number ends (not so for a map's
	// key: then the bytes there are not the number, and nothing changes).
	end = typ.Offset
	start = end - int64(len(lit))
	if start < 0 || end > int64(len(data)) || string(data[start:end]) != lit {
		return 0, 0, 0
	}
	f, err := strconv.ParseFloat(lit, 64) // ±Inf past float64's range, still beyond the bound
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, 0, 0
	}
	bits := typ.Type.Bits()
	switch {
	case signed && f >= math.Ldexp(1, bits-1), !signed && f >= math.Ldexp(1, bits):
		return 1, start, end
	case signed && f < -math.Ldexp(1, bits-1):
		return -1, start, end
	}
	return 0, 0, 0
}

// boundNumber is data with the number that err says is too big for its
// integer field (99999999999999999999, 1e20, -1e20) written as the
// field's largest (smallest) value, and true; false when err is no such
// error. Read so, the number is refused by the domain's own check, in the
// sentence of every other value out of the field's range ("priority must
// be 0 (the default) to 9"), rather than for the Go type the decoder
// writes it into: every integer field a body carries is bounded by its
// domain (TestIntegerOverflowIsOutOfRange), but those of unboundedAbove,
// whose numbers too big are left to tooBig.
func boundNumber(data []byte, err error) ([]byte, bool) {
	if err == nil {
		return nil, false // before typ, whose address errors.As takes: on the heap, for every body
	}
	var typ *json.UnmarshalTypeError
	if !errors.As(err, &typ) {
		return nil, false
	}
	sign, start, end := overflow(data, typ)
	if sign == 0 || sign > 0 && unboundedAbove[typ.Field] != 0 {
		return nil, false
	}
	bits, signed := typ.Type.Bits(), typ.Type.Kind() <= reflect.Int64
	var bound string
	switch {
	case signed && sign > 0:
		bound = strconv.FormatInt(int64(^uint64(0)>>(65-bits)), 10)
	case signed:
		bound = strconv.FormatInt(-int64(^uint64(0)>>(65-bits))-1, 10)
	default:
		bound = strconv.FormatUint(^uint64(0)>>(64-bits), 10)
	}
	out := make([]byte, 0, int64(len(data))-(end-start)+int64(len(bound)))
	out = append(append(append(out, data[:start]...), bound...), data[end:]...)
	return out, true
}

// jsonKind is what the field of a type error takes, for "must be ...".
func jsonKind(typ *json.UnmarshalTypeError) string {
	goKind := typ.Type.Kind().String()
	switch {
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "true or false"
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return wholeNumber(typ.Type, typ.Value)
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "slice":
		return "an array"
	}
	return "an object"
}

// wholeNumber is what an integer field takes, said for the value it was
// given (the decoder's "number 2.5", "string", ...): a number in digits too
// big for the field (only past maxBoundedNumbers of them: boundNumber
// leaves the others to the domain) is told the field's bounds; one with a
// fraction or an exponent (2.5, 1e9: Go reads neither as an integer) how
// to write it. The domain checks its own, narrower range once the value is
// read.
func wholeNumber(t reflect.Type, value string) string {
	lit, isNumber := strings.CutPrefix(value, "number ")
	if !isNumber {
		return "a whole number"
	}
	if strings.Trim(strings.TrimPrefix(lit, "-"), "0123456789") != "" {
		return "a whole number, written in digits without a fraction or an exponent"
	}
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr {
		return fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<t.Bits()-1)
	}
	return fmt.Sprintf("a whole number from %d to %d", -(int64(1) << (t.Bits() - 1)), int64(1)<<(t.Bits()-1)-1)
}

// pathID is the record id the path gives in parameter name: one that
// cannot name a record is store.NoID, which the route looks up and
// answers as any id that names nothing (store.ParseID).
func pathID(c echo.Context, name string) uint64 { return store.ParseID(c.Param(name)) }
