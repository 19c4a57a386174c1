package mail

import (
	"bytes"
	"fmt"
	htmltemplate "html/template"
	"net/url"
	"strings"
	texttemplate "text/template"
	"time"
	"unicode"

	"github.com/simrelay/simrelay/internal/bidi"
	"github.com/simrelay/simrelay/problem"
)

// Message is one e-mail to send. The templates leave To empty: the caller
// knows the recipient.
type Message struct {
	To      string
	Subject string
	Text    string
	HTML    string
	// CompanyID, when set, is the company whose e-mail webhook entry the
	// mail delivers: Send queues it within the company's bound
	// (Config.MaxCompanyPending) and charges it to the company's storage
	// budget. The server's own account mails (verification, password
	// reset, invitation) leave it 0: no company's webhook mail ever takes
	// their place.
	CompanyID uint64
}

// maxNameLen caps a user-supplied name inside a mail. Company and inviter
// names reach addresses the sender does not own (invites), so a long "name"
// must not become a paragraph of someone's spam.
const maxNameLen = 80

// VerifyEmail is the message sent after sign-up, with the link
// {publicURL}/verify-email?token=T; validFor is the token's lifetime
// (account.Config.VerifyTTL), which the mail promises.
func VerifyEmail(publicURL, firstName, companyName, token string, validFor time.Duration) Message {
	intro := "Welcome to simrelay! Your account is almost ready."
	if c := cleanName(companyName); c != "" {
		intro = fmt.Sprintf("Welcome to simrelay! The account of %s is almost ready.", c)
	}
	return render(content{
		Subject:  "Verify your e-mail address for simrelay",
		Greeting: greeting(firstName),
		Lines:    []string{intro, "Please confirm your e-mail address so that you can sign in."},
		Action:   "Verify your e-mail address",
		Link:     link(publicURL, "/verify-email", token),
		Notes: []string{
			"This link expires in " + problem.InWords(validFor) + ".",
			"If you did not sign up for simrelay, you can ignore this e-mail.",
		},
	})
}

// ResetPassword is the message sent on a forgotten password, with the link
// {publicURL}/reset-password?token=T; validFor is the token's lifetime
// (account.Config.ResetTTL), which the mail promises.
func ResetPassword(publicURL, firstName, token string, validFor time.Duration) Message {
	return render(content{
		Subject:  "Reset your simrelay password",
		Greeting: greeting(firstName),
		Lines:    []string{"We received a request to reset the password of your simrelay account."},
		Action:   "Choose a new password",
		Link:     link(publicURL, "/reset-password", token),
		Notes: []string{
			"This link expires in " + problem.InWords(validFor) + " and works once.",
			"If you did not ask for a new password, you can ignore this e-mail: your password stays as it is.",
		},
	})
}

// Invite is the message to a user an admin added to a company. Its link is
// the reset link, {publicURL}/reset-password?token=T: setting the first
// password is the same flow as choosing a new one.
func Invite(publicURL, firstName, companyName, inviterName, token string, validFor time.Duration) Message {
	company, inviter := cleanName(companyName), cleanName(inviterName)
	var subject, intro string
	switch {
	case company != "" && inviter != "":
		subject = fmt.Sprintf("%s invited you to %s on simrelay", inviter, company)
		intro = fmt.Sprintf("%s invited you to join %s on simrelay.", inviter, company)
	case company != "":
		subject = fmt.Sprintf("You are invited to %s on simrelay", company)
		intro = fmt.Sprintf("You have been invited to join %s on simrelay.", company)
	default:
		subject = "You are invited to simrelay"
		intro = "You have been invited to join a company on simrelay."
	}
	notes := []string{"If you did not expect this invitation, you can ignore this e-mail."}
	if validFor > 0 {
		notes = append([]string{"This link expires in " + problem.InWords(validFor) + "."}, notes...)
	}
	return render(content{
		Subject:  subject,
		Greeting: greeting(firstName),
		Lines:    []string{intro, "To get started, set a password for your account."},
		Action:   "Set your password",
		Link:     link(publicURL, "/reset-password", token),
		Notes:    notes,
	})
}

// DeviceOffline tells a company's admin that a phone has been offline for
// longer than the grace; its link is the console's devices page. The
// caller sends at most one per device an hour.
func DeviceOffline(devicesURL, firstName, deviceName, fingerprint string, lastSeen time.Time, grace time.Duration) Message {
	name := cleanName(deviceName)
	if name == "" {
		name = cleanName(fingerprint)
	}
	seen := "It has not connected since it was paired."
	if !lastSeen.IsZero() {
		seen = "It was last heard from at " + lastSeen.UTC().Format("2006-01-02 15:04 UTC") + "."
	}
	return render(content{
		Subject:  fmt.Sprintf("Phone %s is offline", name),
		Greeting: greeting(firstName),
		Lines: []string{
			fmt.Sprintf("The phone %s (%s) lost its link to simrelay and has not come back within %s.", name, cleanName(fingerprint), problem.InWords(grace)),
			seen,
			"Messages for it wait in its queue until it connects again or they expire. Check that the phone is on, has a network and that the app is running.",
		},
		Action: "See your devices",
		Link:   devicesURL,
		Notes:  []string{"You get at most one such e-mail per phone an hour."},
	})
}

// content is what every message is made of; one text and one HTML layout
// render it, so the three messages cannot drift apart in tone or markup.
type content struct {
	Subject  string
	Greeting string
	Lines    []string // before the link
	Action   string   // the link's label
	Link     string   // empty: a message with nothing to follow
	Notes    []string // after the link
}

// The layouts are parsed once; they are constants in all but syntax and
// never change after init.
var (
	textLayout = texttemplate.Must(texttemplate.New("text").Parse(
		`{{.Greeting}}
{{range .Lines}}
{{.}}
{{end}}
{{- if .Link}}
{{.Action}}:
{{.Link}}
{{end}}
{{- range .Notes}}
{{.}}
{{end}}
-- 
simrelay
`))

	htmlLayout = htmltemplate.Must(htmltemplate.New("html").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Subject}}</title>
</head>
<body style="margin:0;padding:24px;background:#f5f6f8;font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;font-size:15px;line-height:1.5;color:#1f2328;">
<div style="max-width:520px;margin:0 auto;background:#ffffff;border-radius:8px;padding:32px;">
<p style="margin:0 0 16px;">{{.Greeting}}</p>
{{- range .Lines}}
<p style="margin:0 0 16px;">{{.}}</p>
{{- end}}
{{- if .Link}}
<p style="margin:24px 0;"><a href="{{.Link}}" style="display:inline-block;background:#1a73e8;color:#ffffff;text-decoration:none;padding:12px 20px;border-radius:6px;font-weight:600;">{{.Action}}</a></p>
<p style="margin:0 0 16px;font-size:13px;color:#57606a;">If the button does not work, paste this address into your browser:<br><a href="{{.Link}}" style="color:#1a73e8;word-break:break-all;">{{.Link}}</a></p>
{{- end}}
{{- range .Notes}}
<p style="margin:0 0 16px;font-size:13px;color:#57606a;">{{.}}</p>
{{- end}}
<p style="margin:24px 0 0;font-size:13px;color:#57606a;">simrelay</p>
</div>
</body>
</html>
`))
)

// render fills both layouts. The data is plain strings, so execution cannot
// fail short of a broken layout, which the package's tests would catch.
func render(c content) Message {
	var text, html bytes.Buffer
	if err := textLayout.Execute(&text, c); err != nil {
		panic(fmt.Sprintf("mail: text layout: %v", err))
	}
	if err := htmlLayout.Execute(&html, c); err != nil {
		panic(fmt.Sprintf("mail: html layout: %v", err))
	}
	return Message{Subject: c.Subject, Text: text.String(), HTML: html.String()}
}

func link(publicURL, path, token string) string {
	return strings.TrimRight(publicURL, "/") + path + "?token=" + url.QueryEscape(token)
}

func greeting(firstName string) string {
	if n := cleanName(firstName); n != "" {
		return "Hi " + n + ","
	}
	return "Hi,"
}

// cleanName makes a user-supplied name safe to put in a subject or a line of
// text: control characters (a newline would start a header or a paragraph of
// the sender's choosing) become spaces, runs of space collapse, and the
// length is capped. Its direction stays its own: explicit directional
// controls (U+202A-U+202E, U+2066-U+2069) are dropped, since a subject is
// shown in notification banners and mail lists that may not honour isolates,
// where an override would run on into "is offline" and read it backwards;
// and a name with right-to-left letters is isolated (U+2068...U+2069) so that
// it does not pull the words and digits beside it to its side. A name of
// left-to-right text comes out as it went in (docs/security.md).
func cleanName(s string) string {
	s = bidi.StripControls(s)
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxNameLen {
		s = strings.TrimSpace(string(r[:maxNameLen-1])) + "…"
	}
	return bidi.Isolate(s)
}
