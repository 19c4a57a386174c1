package web

import "testing"

func TestFieldName(t *testing.T) {
	t.Parallel()
	for field, want := range map[string]string{
		"owner.password":         "Password",
		"sms_per_minute":         "SMS per minute",
		"selected_sim":           "Selected SIM",
		"optOutKeywords":         "Opt out keywords",
		"owner.firstName":        "First name",
		"gap_seconds.max":        "Gap seconds (max)",
		"webhooks[2].url":        "URL",
		"webhooks[2].wa_numbers": "WhatsApp numbers",
		"":                       "This field",
		"..":                     "This field",
		"name":                   "Name",
		"members[3]":             "Members (item 4)",
		"webhooks[0].events[1]":  "Events (item 2)",
	} {
		if got := fieldName(field); got != want {
			t.Errorf("fieldName(%q) = %q, want %q", field, got, want)
		}
	}
}
