package store

import "testing"

func TestDeliveryBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ event, want string }{
		{`{"type":"sms.received","data":{"a":1}}`, `{"id":"d-1","type":"sms.received","data":{"a":1}}`},
		{`{}`, `{"id":"d-1"}`},
		{` { } `, `{"id":"d-1" }`},
	} {
		if got := string(DeliveryBody("d-1", []byte(tc.event))); got != tc.want {
			t.Errorf("DeliveryBody(%s): got %s, want %s", tc.event, got, tc.want)
		}
	}
}
