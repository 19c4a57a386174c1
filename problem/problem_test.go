package problem

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"testing"
)

// TestCatalogIsDocumented keeps docs/api.md's error table and the catalog in step:
// every code with its status, and no documented code the server never sends.
func TestCatalogIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (\\d{3}) \\|").FindAllStringSubmatch(string(doc), -1)
	documented := map[string]string{}
	for _, r := range rows {
		documented[r[1]] = r[2]
	}
	for _, c := range Codes() {
		want := fmt.Sprint(c.Status())
		if got, ok := documented[string(c)]; !ok {
			t.Errorf("code %s is not in docs/api.md's error table", c)
		} else if got != want {
			t.Errorf("code %s: docs say %s, the server answers %s", c, got, want)
		}
		delete(documented, string(c))
	}
	for code := range documented {
		t.Errorf("docs/api.md documents %s, which is not in the catalog", code)
	}
}

func TestStatusOfUnknownCode(t *testing.T) {
	t.Parallel()
	if got := Code("made_up").Status(); got != http.StatusInternalServerError {
		t.Errorf("got %d, want 500 for a code outside the catalog", got)
	}
	e := Invalid("owner.password", "is too short")
	if e.Status() != http.StatusBadRequest || !Is(fmt.Errorf("wrapped: %w", e), ValidationFailed) {
		t.Errorf("Invalid: got status %d", e.Status())
	}
}
