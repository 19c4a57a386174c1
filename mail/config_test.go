package mail

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" means valid
	}{
		{"zero value: log mode", Config{}, ""},
		{"smtp with port", Config{SMTPURL: "smtp://mail.example.com:587"}, ""},
		{"smtp with credentials", Config{SMTPURL: "smtp://ana:secret@mail.example.com:587"}, ""},
		{"smtp escaped user", Config{SMTPURL: "smtp://ana%40example.com:secret@mail.example.com:25"}, ""},
		{"smtps", Config{SMTPURL: "smtps://ana:secret@mail.example.com:465"}, ""},
		{"ipv6 host", Config{SMTPURL: "smtp://[::1]:25"}, ""},
		{"trailing slash", Config{SMTPURL: "smtp://mail.example.com:25/"}, ""},
		{"custom from", Config{From: "Acme SMS <sms@acme.example>"}, ""},
		{"public url", Config{PublicURL: "https://sms.example.com"}, ""},
		{"bad scheme", Config{SMTPURL: "http://mail.example.com:25"}, `--smtp-url "http://mail.example.com:25": unknown scheme "http"`},
		{"no scheme", Config{SMTPURL: "mail.example.com:25"}, "--smtp-url"},
		{"bare host", Config{SMTPURL: "mail.example.com"}, "--smtp-url"},
		{"missing port", Config{SMTPURL: "smtp://mail.example.com"}, "want host:port"},
		{"empty port", Config{SMTPURL: "smtp://mail.example.com:"}, "--smtp-url"},
		{"port zero", Config{SMTPURL: "smtp://mail.example.com:0"}, "port must be 1 to 65535"},
		{"port too big", Config{SMTPURL: "smtp://mail.example.com:70000"}, "--smtp-url"},
		{"no host", Config{SMTPURL: "smtp://:25"}, "want host:port"},
		{"path", Config{SMTPURL: "smtp://mail.example.com:25/inbox"}, "path or fragment"},
		{"tls required", Config{SMTPURL: "smtp://ana:secret@mail.example.com:587?tls=required"}, ""},
		{"tls opportunistic", Config{SMTPURL: "smtp://mail.example.com:25?tls=opportunistic"}, ""},
		{"tls insecure with credentials", Config{SMTPURL: "smtp://ana:secret@relay.lan:25?tls=insecure"}, ""},
		{"smtps tls required", Config{SMTPURL: "smtps://mail.example.com:465?tls=required"}, ""},
		{"unknown tls mode", Config{SMTPURL: "smtp://mail.example.com:25?tls=off"}, `tls="off": want required, opportunistic or insecure`},
		{"unknown parameter", Config{SMTPURL: "smtp://mail.example.com:25?starttls=no"}, `unknown parameter "starttls"`},
		{"tls twice", Config{SMTPURL: "smtp://mail.example.com:25?tls=required&tls=insecure"}, "tls given more than once"},
		{"tls opportunistic with credentials", Config{SMTPURL: "smtp://ana:secret@mail.example.com:25?tls=opportunistic"}, "the password would go without TLS"},
		{"tls opportunistic with credentials on loopback", Config{SMTPURL: "smtp://ana:secret@127.0.0.1:25?tls=opportunistic"}, "tls=insecure allows that"},
		{"smtps tls opportunistic", Config{SMTPURL: "smtps://mail.example.com:465?tls=opportunistic"}, "smtps is TLS from the first byte"},
		{"password without user", Config{SMTPURL: "smtp://:secret@mail.example.com:25"}, "needs a user name"},
		{"bad from", Config{From: "not an address"}, "--smtp-from"},
		{"relative public url", Config{PublicURL: "sms.example.com"}, "--public-url"},
		{"ftp public url", Config{PublicURL: "ftp://sms.example.com"}, "--public-url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got error %v, want none", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("got no error, want one containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("got error %q, want it to contain %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestConfigHidesPassword(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url          string
		wantRedacted string
	}{
		{"", ""},
		{"smtp://mail.example.com:587", "smtp://mail.example.com:587"},
		{"smtp://ana@mail.example.com:587", "smtp://ana@mail.example.com:587"},
		{"smtp://ana:s3cret@mail.example.com:587", "smtp://ana:xxxxx@mail.example.com:587"},
		{"smtps://ana:s3cret@mail.example.com:465", "smtps://ana:xxxxx@mail.example.com:465"},
		// url.Parse refuses these; the password must stay hidden anyway.
		{"smtp://ana:s3cret@mail.example.com:port", "smtp://ana:xxxxx@mail.example.com:port"},
		{"smtp://ana:s3cr@et@mail example:25", "smtp://ana:xxxxx@mail example:25"},
		{"smtp://ana:s3/cret@mail.example.com:587", "smtp://ana:xxxxx@mail.example.com:587"},
	}
	for _, tt := range tests {
		cfg := Config{SMTPURL: tt.url}
		if got := cfg.Redacted(); got != tt.wantRedacted {
			t.Errorf("Redacted(%q): got %q, want %q", tt.url, got, tt.wantRedacted)
		}
		var logged bytes.Buffer
		slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "mail", cfg)
		for what, s := range map[string]string{"String": cfg.String(), "log": logged.String(), "Validate": errText(cfg.Validate())} {
			if strings.Contains(s, "s3cr") {
				t.Errorf("%s of %q: got %q, which shows the password", what, tt.url, s)
			}
		}
	}
	if got, want := (Config{}).String(), "smtp=off"; !strings.Contains(got, want) {
		t.Errorf("String of the zero Config: got %q, want it to contain %q", got, want)
	}
	if got, want := (Config{}).String(), DefaultFrom; !strings.Contains(got, want) {
		t.Errorf("String of the zero Config: got %q, want it to name the default From %q", got, want)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// An smtp:// URL's TLS mode by default: required, except to a relay on this
// machine that takes no credentials (its traffic never crosses a network).
func TestSMTPURLTLSDefault(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ url, want string }{
		{"smtp://mail.example.com:25", TLSRequired},
		{"smtp://10.0.0.5:25", TLSRequired},
		{"smtp://relay.lan:587", TLSRequired},
		{"smtp://127.0.0.1:25", TLSOpportunistic},
		{"smtp://127.8.9.10:25", TLSOpportunistic},
		{"smtp://[::1]:25", TLSOpportunistic},
		{"smtp://LocalHost:25", TLSOpportunistic},
		{"smtp://localhost.example.com:25", TLSRequired},
		{"smtp://ana:secret@127.0.0.1:25", TLSRequired},
		{"smtp://ana@localhost:25", TLSRequired},
		{"smtp://127.0.0.1:25?tls=required", TLSRequired},
		{"smtp://mail.example.com:25?tls=opportunistic", TLSOpportunistic},
		{"smtp://ana:secret@mail.example.com:25?tls=insecure", TLSInsecure},
		{"smtps://127.0.0.1:465", TLSRequired},
	} {
		got, err := parseSMTPURL(tt.url)
		if err != nil {
			t.Errorf("%s: %v", tt.url, err)
			continue
		}
		if got.tls != tt.want {
			t.Errorf("%s: tls mode %q, want %q", tt.url, got.tls, tt.want)
		}
	}
}
