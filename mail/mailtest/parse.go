package mailtest

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/url"
	"strings"
)

// maxDepth bounds nested multiparts; real mail nests two or three deep.
const maxDepth = 8

// Received is one delivered message.
type Received struct {
	// From is the From header, MIME words decoded, e.g.
	// `"simrelay" <no-reply@localhost>`; parse it with net/mail to compare.
	From string
	// To are the envelope recipients (RCPT TO), bare addresses: who the
	// server actually delivered to, whatever the headers say.
	To []string
	// MailFrom is the envelope sender (MAIL FROM).
	MailFrom string
	// Subject is the Subject header, MIME words decoded.
	Subject string
	// Text and HTML are the first text/plain and text/html parts, transfer
	// encoding undone and line ends turned to "\n"; empty when absent.
	Text string
	HTML string
	// Header is the top-level header.
	Header mail.Header
	// Raw is the message as received after DATA.
	Raw []byte
}

func (m Received) sentTo(addr string) bool {
	for _, r := range m.To {
		if strings.EqualFold(r, addr) {
			return true
		}
	}
	return false
}

// parse reads a message the way a mail client would, as far as tests need.
func parse(raw []byte) (Received, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Received{}, fmt.Errorf("header: %w", err)
	}
	var dec mime.WordDecoder
	m := Received{Header: msg.Header, Raw: raw}
	if m.From, err = dec.DecodeHeader(msg.Header.Get("From")); err != nil {
		return Received{}, fmt.Errorf("from header: %w", err)
	}
	if m.Subject, err = dec.DecodeHeader(msg.Header.Get("Subject")); err != nil {
		return Received{}, fmt.Errorf("subject header: %w", err)
	}
	err = m.walk(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body, 0)
	return m, err
}

// walk descends into multiparts and keeps the first text and HTML leaves.
func (m *Received) walk(contentType, encoding string, body io.Reader, depth int) error {
	if contentType == "" {
		contentType = "text/plain; charset=us-ascii" // RFC 2045's default
	}
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("Content-Type %q: %w", contentType, err)
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		if depth >= maxDepth {
			return errors.New("multiparts nested too deep")
		}
		if params["boundary"] == "" {
			return fmt.Errorf("%s without a boundary", mediaType)
		}
		// NextRawPart, not NextPart: NextPart undoes quoted-printable on its
		// own but not base64, and a test inbox should see both the same way.
		r := multipart.NewReader(body, params["boundary"])
		for {
			p, err := r.NextRawPart()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", mediaType, err)
			}
			if err := m.walk(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p, depth+1); err != nil {
				return err
			}
		}
	}
	if mediaType != "text/plain" && mediaType != "text/html" {
		return nil // attachments and the like: not needed by tests
	}
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, body) // skips line breaks
	case "", "7bit", "8bit", "binary":
	default:
		return fmt.Errorf("%s: unknown Content-Transfer-Encoding %q", mediaType, encoding)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("%s body: %w", mediaType, err)
	}
	text := strings.ReplaceAll(string(b), "\r\n", "\n")
	switch {
	case mediaType == "text/plain" && m.Text == "":
		m.Text = text
	case mediaType == "text/html" && m.HTML == "":
		m.HTML = text
	}
	return nil
}

// LinkToken returns the token query value of the first link to path that
// has one, in a text or HTML body (HTML entities such as &amp; are undone
// first); "" when there is none. A link to path is path followed by "?", e.g. path "/verify-email"
// finds https://host/verify-email?token=T.
func LinkToken(body, path string) string {
	body = html.UnescapeString(body)
	for rest := body; ; {
		i := strings.Index(rest, path+"?")
		if i < 0 {
			return ""
		}
		rest = rest[i+len(path)+1:]
		query := rest
		if end := strings.IndexAny(query, " \t\r\n\"'<>()"); end >= 0 {
			query = query[:end]
		}
		query, _, _ = strings.Cut(query, "#")
		v, err := url.ParseQuery(query)
		if err == nil && v.Has("token") {
			return v.Get("token")
		}
	}
}
