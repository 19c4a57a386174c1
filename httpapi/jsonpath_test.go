package httpapi

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestJSONPathOfTypeErrors(t *testing.T) {
	t.Parallel()
	type sim struct {
		Slot    string `json:"slot"`
		Carrier string `json:"carrier"`
	}
	type hook struct {
		URL  string `json:"url"`
		SIMs []int  `json:"sims"`
	}
	type body struct {
		Name  string `json:"name"`
		SIMs  []sim  `json:"sims"`
		Hooks []hook `json:"webhooks"`
		Owner struct {
			Password string `json:"password"`
		} `json:"owner"`
		Active bool `json:"active"`
	}
	for in, want := range map[string]string{
		`{"name": 5}`: "name",
		`{"sims": [{"slot": "SIM1"}, {"slot": 2}]}`:                          "sims[1].slot",
		`{"sims": [{"slot": "SIM1", "carrier": {"x": [1, 2]}}]}`:             "sims[0].carrier",
		`{"name": "a", "webhooks": [{"url": "u"}, {"sims": [0, "1"]}]}`:      "webhooks[1].sims[1]",
		`{"webhooks": [{"url": ["x"]}]}`:                                     "webhooks[0].url",
		`{"sims": {"slot": "SIM1"}}`:                                         "sims",
		`{"owner": {"password": true}, "name": "x"}`:                         "owner.password",
		`{"x": {"deep": [1, {"y": 2}]}, "active": "yes"}`:                    "active",
		`{"name": "\"quoted\" {[", "sims": [{"slot": null}, {"slot": 1.5}]}`: "sims[1].slot",
	} {
		var v body
		err := json.Unmarshal([]byte(in), &v)
		var typ *json.UnmarshalTypeError
		if !errors.As(err, &typ) {
			t.Fatalf("%s: got %v, want a type error", in, err)
		}
		if got := jsonPath([]byte(in), typ.Offset); got != want {
			t.Errorf("%s: got path %q, want %q", in, got, want)
		}
	}
	if got := jsonPath([]byte(`{"a": `), 100); got != "" {
		t.Errorf("truncated input: got %q, want \"\"", got)
	}
}
