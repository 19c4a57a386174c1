package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/simrelay/simrelay/window"
)

// Sending windows on sends and pools (docs/routing.md).

type windowJSON struct {
	Days     []string `json:"days,omitempty"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	TimeZone string   `json:"time_zone"`
}

func (w *windowJSON) window() *window.Window {
	if w == nil {
		return nil
	}
	return &window.Window{Days: w.Days, From: w.From, To: w.To, TimeZone: w.TimeZone}
}

func windowOut(w *window.Window) *windowJSON {
	if w == nil {
		return nil
	}
	return &windowJSON{Days: w.Days, From: w.From, To: w.To, TimeZone: w.TimeZone}
}

// windowField is a pool's window in a change: absent keeps it, null takes
// it away, an object sets it.
type windowField struct {
	set bool
	w   *windowJSON
}

func (f *windowField) UnmarshalJSON(b []byte) error {
	f.set, f.w = true, nil
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	f.w = new(windowJSON)
	err := json.Unmarshal(b, f.w)
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		// Its offset counts from the window, not from the body that bind
		// finds the path in, so the path inside the window is found here,
		// indexes and all (days[1], where Field says days), and the offset
		// is cleared: bind then takes Field, which the decoder prefixes
		// with the window's own ("window.days[1]").
		if at := jsonPath(b, typ.Offset); at != "" {
			typ.Field = at
		}
		typ.Offset = 0
	}
	return err
}
