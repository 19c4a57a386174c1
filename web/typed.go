package web

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/simrelay/simrelay/webhook"
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
// picked in the form. The webhooks form's fields are its rows'
// (webhookRowFields, webhookGroups): its signing secret is no field of it
// (it is only shown, and rotated by a form of its own, which has nothing
// typed) and so never in the cookie.
var typedFields = map[string][]string{
	Prefix + "/messages/send": {"phone", "sim_slot", "send_at", "message"},
	Prefix + "/opt-outs":      {"phone"},
	Prefix + "/team/invite":   {"email", "firstName", "lastName", "role"},
	"number send":             {"to", "type", "media_url", "content"},
}

// webhooksAction is the webhooks form's action; its rows are kept whole
// (webhookGroups), one group of fields each, drawn again by typedRow.
const webhooksAction = Prefix + "/webhooks"

// webhookRowFields are the fields of one row of the webhooks form
// (webhooks[i].<field>), as saveWebhooks reads them. The first, the row's
// entry id, is kept for every row kept, "" for the new row: it is the
// row's mark, and the page fills a row only with the values of the same
// entry (typedRow).
var webhookRowFields = []string{"id", "url", "active", "devices", "sims", "channels", "events", "wa_numbers", "im_handles", "remove"}

// Typed is what a refused plain post's form held, for that form alone.
// A field holds its values in the order posted: one for most, those of
// the boxes ticked for a list of check boxes.
type Typed struct {
	Action string              `json:"a"`
	Sig    string              `json:"s"`
	Values map[string][]string `json:"v"`
}

// Value is what the form posted to action held in field, or "".
func (t Typed) Value(action, field string) string {
	if t.Action != action || len(t.Values[field]) == 0 {
		return ""
	}
	return t.Values[field][0]
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
// sig for the browser bind, whose error names field. Where the whole does
// not fit, groups of fields are left out from the last until it does: a
// form's long text last (the send box's message, a number's text), the
// webhooks form's rows from its last, the row the error names first.
func (c *Console) keepTyped(w http.ResponseWriter, r *http.Request, bind, sig, field string) {
	action := typedAction(r.URL.Path)
	if bind == "" {
		return
	}
	var groups [][]string
	if action == webhooksAction {
		groups = webhookGroups(r, field)
	} else if fields, ok := typedFields[action]; ok {
		for _, f := range fields {
			groups = append(groups, []string{f})
		}
	}
	t := Typed{Action: action, Sig: sig, Values: map[string][]string{}}
	for _, g := range groups {
		for _, f := range g {
			if v := typedValues(r.PostForm[f]); len(v) > 0 {
				t.Values[f] = v
			}
		}
	}
	if action == webhooksAction {
		for _, g := range groups {
			// The row's mark, its id: which entry it was, "" for the new one.
			t.Values[g[0]] = []string{r.PostForm.Get(g[0])}
			if u := t.Values[g[1]]; len(u) > 0 {
				t.Values[g[1]] = []string{withoutUserInfo(u[0])}
			}
		}
	}
	for n := len(groups); n >= 0; n-- {
		if n < len(groups) {
			for _, f := range groups[n] {
				delete(t.Values, f)
			}
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

// typedValues are a field's values as posted, none when all are empty.
func typedValues(vs []string) []string {
	for _, v := range vs {
		if v != "" {
			return vs
		}
	}
	return nil
}

// webhookGroups are the groups of fields of the webhooks form's rows,
// each webhookRowFields, its id first: the row the error field names
// first, then the others in order.
func webhookGroups(r *http.Request, field string) [][]string {
	n, err := strconv.Atoi(r.PostForm.Get("rows"))
	if err != nil || n < 0 || n > webhook.MaxEntries+1 {
		return nil
	}
	first := -1
	if m := entryField.FindStringSubmatch(field); m != nil {
		first, _ = strconv.Atoi(m[1])
	}
	var groups [][]string
	for i := range n {
		at := fmt.Sprintf("webhooks[%d].", i)
		g := make([]string, len(webhookRowFields))
		for j, f := range webhookRowFields {
			g[j] = at + f
		}
		if i == first {
			groups = append([][]string{g}, groups...)
		} else {
			groups = append(groups, g)
		}
	}
	return groups
}

// withoutUserInfo is a URL typed without its user name and password, which
// the service refuses in a webhook's URL (webhook.CheckURL): a password is
// nothing to keep in a cookie.
func withoutUserInfo(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		if strings.Contains(raw, "@") {
			return "" // it may hold one, unparsed
		}
		return raw
	}
	if u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
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
