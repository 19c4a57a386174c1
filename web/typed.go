package web

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
)

// typedCookie carries what a plain post's refused form held to the page it
// comes back to (answerErr), which fills the form with it: the form came
// back empty, the message written to be written again. The script's path
// keeps its form and needs none of this.
//
// A cookie rather than the address: the text of a message is nothing to
// put in a URL (the browser's history, a proxy's log), and the page the
// redirect leads to keeps the address, the status and the one request it
// has; rendering the page in answer to the post instead would leave the
// browser on the post's address, whose reload posts again. The cookie
// lives a minute, is HttpOnly, is signed with the flash key for the
// browser it was made for (the session's CSRF token, as a flash is), names
// the flash it goes with (its sig) and the form it came from (its action),
// and is cleared by the page that reads it: it fills that form on the page
// showing that very error, in that browser, once.
const typedCookie = "simrelay_typed"

// typedMaxBytes bounds the cookie's value under a browser's 4 KB for a
// cookie: a text too long for it is left out (the other fields are kept).
const typedMaxBytes = 3500

// typedFields are the fields a form may get back, by the form's action:
// never a password, a token or a secret, only what the user typed or
// picked in the form. The webhooks form is not among them: its entries
// come back as the page draws them (docs/console.md).
var typedFields = map[string][]string{
	Prefix + "/messages/send": {"phone", "sim_slot", "send_at", "message"},
	Prefix + "/opt-outs":      {"phone"},
	Prefix + "/team/invite":   {"email", "firstName", "lastName", "role"},
	"number send":             {"to", "type", "media_url", "content"},
}

// Typed is what a refused plain post's form held, for that form alone.
type Typed struct {
	Action string            `json:"a"`
	Sig    string            `json:"s"`
	Values map[string]string `json:"v"`
}

// Value is what the form posted to action held in field, or "".
func (t Typed) Value(action, field string) string {
	if t.Action != action {
		return ""
	}
	return t.Values[field]
}

// typedAction is the key of typedFields for a post to path: a number's
// send (one for each number) is one form.
func typedAction(path string) string {
	if strings.HasPrefix(path, Prefix+"/numbers/") && strings.HasSuffix(path, "/send") {
		return "number send"
	}
	return path
}

// keepTyped sets the cookie for a plain post refused with the flash signed
// sig for the browser bind. Where the whole does not fit, fields are left
// out from the last, a form's long text (the send box's message, a
// number's text), until it does.
func (c *Console) keepTyped(w http.ResponseWriter, r *http.Request, bind, sig string) {
	action := typedAction(r.URL.Path)
	fields, ok := typedFields[action]
	if !ok || bind == "" {
		return
	}
	t := Typed{Action: action, Sig: sig, Values: map[string]string{}}
	for _, f := range fields {
		if v := r.PostForm.Get(f); v != "" {
			t.Values[f] = v
		}
	}
	for n := len(fields); n >= 0; n-- {
		if n < len(fields) {
			delete(t.Values, fields[n])
		}
		if len(t.Values) == 0 {
			return
		}
		if v := c.typedValue(bind, t); len(v) <= typedMaxBytes {
			c.setCookie(w, typedCookie, v, 60)
			return
		}
	}
}

func (c *Console) typedValue(bind string, t Typed) string {
	js, _ := json.Marshal(t)
	payload := base64.RawURLEncoding.EncodeToString(js)
	return payload + "." + c.flash.sign(bind, "typed", payload, "")
}

// typed reads the cookie for the page r whose flash is the error fl, for
// the browser bind, and clears it: what it holds comes back once, and only
// to the page of the error it was set with.
func (c *Console) typed(w http.ResponseWriter, r *http.Request, bind string, fl Flash) Typed {
	ck, err := r.Cookie(c.cookieName(typedCookie))
	if err != nil {
		return Typed{}
	}
	c.setCookie(w, typedCookie, "", -1)
	if fl.OK || fl.Message == "" || bind == "" {
		return Typed{}
	}
	payload, sig, ok := strings.Cut(ck.Value, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(c.flash.sign(bind, "typed", payload, ""))) {
		return Typed{}
	}
	js, err := base64.RawURLEncoding.DecodeString(payload)
	var t Typed
	if err != nil || json.Unmarshal(js, &t) != nil || t.Sig == "" || t.Sig != query(r).Get("sig") {
		return Typed{}
	}
	return t
}
