package client

import "testing"

// A registration kept on disk is used only when POST /device/register
// could have handed it out: a device token that fits an Authorization
// header and a ws:// or wss:// link address. The phone's token file and
// the agent's configuration both check it so.
func TestRegistrationProblem(t *testing.T) {
	t.Parallel()
	const tok = "dt_UNhY4JhezH9gQYqvDMWrWH9CwlcKiECVqejMrND2VFw"
	for _, tc := range []struct {
		reg  Registration
		want string
	}{
		{Registration{tok, "wss://sms.example.com/device/ws"}, ""},
		{Registration{tok, "ws://127.0.0.1:8080/device/ws"}, ""},
		{Registration{"UNhY4JhezH9gQYqvDMWrWH9CwlcKiECVqejMrND2VFw", "wss://sms.example.com/device/ws"}, "its device_token is not a device token"},
		{Registration{"dt_", "wss://sms.example.com/device/ws"}, "its device_token is not a device token"},
		{Registration{"dt_abc\r\nX-Evil: 1", "wss://sms.example.com/device/ws"}, "its device_token is not a device token"},
		{Registration{"dt_" + string(make([]byte, 257)), "wss://sms.example.com/device/ws"}, "its device_token is not a device token"},
		{Registration{tok, "https://sms.example.com/device/ws"}, "its ws_url is not a ws:// or wss:// URL"},
		{Registration{tok, "wss:///device/ws"}, "its ws_url is not a ws:// or wss:// URL"},
		{Registration{tok, "wss://host\x7f/"}, "its ws_url is not a ws:// or wss:// URL"},
	} {
		if got := tc.reg.Problem(); got != tc.want {
			t.Errorf("%q %q: %q, want %q", tc.reg.DeviceToken, tc.reg.WSURL, got, tc.want)
		}
	}
}
