package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/simrelay/simrelay/problem"
)

// field is one field of a change's body (PATCH /pools/{id}, PATCH
// /whatsapp/numbers/{id}, ...) that tells its three states apart, as
// docs/api.md ("null in a change") says them: absent keeps the stored
// value; null clears a field that can be cleared (clearable) and is refused
// on one that cannot (value); anything else is the new value.
type field[T any] struct {
	// Set says the body has the field, null or not; Null that it is null.
	Set, Null bool
	// Value is the field's value when it is set and not null. Exported,
	// as every field bind decodes, so that holdsNUL sees its strings.
	Value T
}

func (f *field[T]) UnmarshalJSON(b []byte) error {
	*f = field[T]{Set: true}
	if bytes.Equal(b, []byte("null")) {
		f.Null = true
		return nil
	}
	_, err := unmarshalBounded(b, &f.Value)
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		// Its offset counts from the field's value, not from the body
		// that bind finds the path in, so the path inside the value is
		// found here, indexes and all (days[1], where Field says days),
		// and the offset is cleared: bind then takes Field, which the
		// decoder prefixes with the field's own name ("window.days[1]").
		if at := jsonPath(b, typ.Offset); at != "" {
			typ.Field = at
		}
		typ.Offset = 0
	}
	return err
}

// value is the field's new value, nil when the body leaves it out; null
// is 400 naming the field (name, its path in the body): the field has no
// empty state to clear it to.
func (f field[T]) value(name string) (*T, error) {
	if f.Null {
		return nil, problem.Invalid(name, "cannot be null: give a value, or leave the field out to keep it")
	}
	if !f.Set {
		return nil, nil
	}
	return &f.Value, nil
}

// clearable is the field's new value, nil when the body leaves it out; null
// is the zero value, the field's empty state ("" or 0: no fallback, no
// failover, the server's default cap), exactly as sending it.
func (f field[T]) clearable() *T {
	if !f.Set {
		return nil
	}
	if f.Null {
		var zero T
		return &zero
	}
	return &f.Value
}
