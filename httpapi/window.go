package httpapi

import "github.com/simrelay/simrelay/window"

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
