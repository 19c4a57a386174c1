package web

import (
	"html/template"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/syncbuf"
)

// A page whose template fails halfway is a 500 with the console's plain
// error, logged: the status was written before the template ran, so the
// browser got a 200 with the half drawn so far (or an empty page).
func TestRenderFailureIsA500NotHalfAPage(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	broken := template.Must(template.New("broken").Parse(`<h1>drawn so far</h1>{{.NoSuchField}}`))
	whole := template.Must(template.New("whole").Parse(`<h1>{{.Title}}</h1>`))
	c := &Console{deps: Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		pages: map[string]*template.Template{"broken": broken, "whole": whole}}
	v := view{Title: "Devices", Flash: Flash{Message: "set, so no cookie is read"}}

	w := httptest.NewRecorder()
	c.render(w, httptest.NewRequest(http.MethodGet, Prefix+"/devices", nil), http.StatusOK, "broken", v)
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "drawn so far") {
		t.Errorf("a template failing halfway: %d %q, want 500 and nothing of the page", w.Code, w.Body.String())
	}
	if !strings.Contains(logs.String(), "console: render") {
		t.Errorf("the failure is not logged:\n%s", logs.String())
	}

	w = httptest.NewRecorder()
	c.render(w, httptest.NewRequest(http.MethodGet, Prefix+"/devices", nil), http.StatusCreated, "whole", v)
	if w.Code != http.StatusCreated || w.Body.String() != "<h1>Devices</h1>" || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("a page drawn whole: %d %q %q", w.Code, w.Body.String(), w.Header().Get("Content-Type"))
	}
	w = httptest.NewRecorder()
	c.render(w, httptest.NewRequest(http.MethodHead, Prefix+"/devices", nil), http.StatusOK, "broken", v)
	if w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Errorf("HEAD: %d %q, want 200 and no body (the page is not drawn)", w.Code, w.Body.String())
	}
}
