package smtpd

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"

	"github.com/simrelay/simrelay/internal/visible"
	"github.com/simrelay/simrelay/sms"
)

// Bounds of reading one mail's structure: real clients nest two or three
// levels (mixed > alternative > related); these stop a crafted mail from
// costing more than its size.
const (
	maxDepth = 8
	maxParts = 64
)

// Mail is what the listener takes from a message.
type Mail struct {
	Text      string // the SMS: the body's text, signature and quoted reply cut
	MessageID string // the Message-ID header, "" when absent
}

// errNoText is a mail without a text/plain or text/html part.
var errNoText = errors.New("the mail has no text/plain or text/html part")

// ReadMail reads a message's SMS text: the first text/plain part that is no
// attachment, or else (none, or one with nothing visible in it) the first
// text/html part turned into text; then Clean. When that leaves nothing,
// the subject is the text.
func ReadMail(raw []byte) (Mail, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Mail{}, fmt.Errorf("the message header cannot be read: %v", err)
	}
	r := partReader{}
	if err := r.walk(msg.Header, msg.Body, 0); err != nil {
		return Mail{}, err
	}
	if r.plain == nil && r.html == nil {
		return Mail{}, errNoText
	}
	var text string
	if r.plain != nil {
		text = Clean(layout.Replace(*r.plain))
	}
	// A plain part that shows nothing (the empty text/plain alternative of
	// a sender that fills only the HTML, as Django's EmailMultiAlternatives
	// with an empty body) gives way to the HTML: its text, not the subject,
	// is the SMS.
	if r.html != nil && visible.None(text) {
		text = Clean(layout.Replace(HTMLText(*r.html)))
		if utf8.RuneCountInString(text) > sms.MaxMessageChars {
			// The links' addresses made it too long for an SMS: the text
			// alone may fit, and is better than a refused mail.
			text = Clean(layout.Replace(htmlText(*r.html, false)))
		}
	}
	if text == "" {
		// The subject's encoded words in the charsets a body is read in
		// (the standard decoder knows only UTF-8, Latin-1 and ASCII, and
		// left ISO-2022-JP or windows-1252 as its raw =?...?= text).
		dec := &mime.WordDecoder{CharsetReader: charsetReader}
		subject, err := dec.DecodeHeader(msg.Header.Get("Subject"))
		if err != nil {
			subject = msg.Header.Get("Subject")
		}
		// A header is the bytes as sent, which need not be UTF-8 (8-bit
		// text, or an encoded word said to be UTF-8 that is not): they
		// read as U+FFFD, as in a body.
		// The SMS text is stored and sent as UTF-8, and PostgreSQL refuses
		// anything else (a fault, 451, that a mail server retries for days).
		text = strings.TrimSpace(layout.Replace(strings.ToValidUTF8(subject, "\uFFFD")))
	}
	return Mail{Text: text, MessageID: strings.TrimSpace(msg.Header.Get("Message-ID"))}, nil
}

// header is the part of a MIME header the reader needs: a mail's
// (mail.Header) or a part's (textproto.MIMEHeader).
type header interface{ Get(string) string }

// partReader finds the first plain and HTML text of a message's tree.
type partReader struct {
	plain, html *string
	parts       int
}

func (r *partReader) walk(h header, body io.Reader, depth int) error {
	r.parts++
	if r.parts > maxParts || depth > maxDepth {
		return fmt.Errorf("the message has more than %d parts or %d levels", maxParts, maxDepth)
	}
	ct := h.Get("Content-Type")
	if ct == "" {
		ct = "text/plain; charset=us-ascii"
	}
	media, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("the Content-Type %q cannot be read", ct)
	}
	if strings.HasPrefix(media, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart() // NextPart would decode quoted-printable itself, but not base64
			// The mail's end without the closing boundary (MIME written by
			// hand in a script, which mail programs show all the same) ends
			// the parts: between two of them the reader says io.EOF,
			// wrapped; inside one, unclosed ends it at the mail's end.
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("a part of the message cannot be read: %v", err)
			}
			part := &unclosed{r: p}
			if err := r.walk(p.Header, part, depth+1); err != nil {
				return err
			}
			if part.cut {
				return nil
			}
		}
	}
	// A part that is a file is not the mail's text, whatever its
	// disposition says: Apple Mail attaches a text file "inline;
	// filename=...", and older programs name one in its Content-Type alone;
	// taken as the text, an attached log was sent as the SMS in place of an
	// HTML body. A mail of one part (depth 0) is its own text, named or not.
	if disp, dparams, _ := mime.ParseMediaType(h.Get("Content-Disposition")); disp == "attachment" || depth > 0 && (dparams["filename"] != "" || params["name"] != "") {
		return nil
	}
	if media != "text/plain" && media != "text/html" || media == "text/plain" && r.plain != nil || media == "text/html" && r.html != nil {
		return nil
	}
	text, err := decode(body, h.Get("Content-Transfer-Encoding"), params["charset"])
	if err != nil {
		return err
	}
	if media == "text/plain" {
		if strings.EqualFold(params["format"], "flowed") {
			// unflow reads a line by its first and last characters: a
			// byte-order mark before them (layout drops it, but later)
			// would hide a quote, a signature or a stuffed space.
			text = unflow(dropBOM(text), strings.EqualFold(params["delsp"], "yes"))
		}
		r.plain = &text
	} else {
		r.html = &text
	}
	return nil
}

// unclosed is a part of a multipart body read to the mail's end when no
// boundary closes it: the multipart reader's io.ErrUnexpectedEOF there is
// the part's end (cut says it came), so the text before it is read. A
// transfer encoding cut short inside (base64 in the middle of a quantum) is
// still refused by its decoder.
type unclosed struct {
	r   io.Reader
	cut bool
}

func (u *unclosed) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		u.cut, err = true, io.EOF
	}
	return n, err
}

// decode undoes a part's transfer encoding and reads its charset into UTF-8.
func decode(body io.Reader, encoding, cs string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, &newlineSkipper{r: body})
	}
	if cs != "" && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
		r, err := charsetReader(cs, body)
		if err != nil {
			return "", err
		}
		body = r
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return "", fmt.Errorf("a text part cannot be decoded: %v", err)
	}
	return strings.ToValidUTF8(string(raw), "\uFFFD"), nil
}

// charsetReader reads text in the charset cs as UTF-8: the labels mail
// clients write, by the WHATWG table browsers use.
func charsetReader(cs string, r io.Reader) (io.Reader, error) {
	if strings.EqualFold(strings.TrimSpace(cs), "utf-16") {
		// The WHATWG table makes "utf-16" little-endian and keeps a
		// byte-order mark as text, which turns big-endian text (Java's
		// "UTF-16") into CJK soup. RFC 2781: the mark says the order, and
		// text without one is big-endian.
		return transform.NewReader(r, unicode.UTF16(unicode.BigEndian, unicode.UseBOM).NewDecoder()), nil
	}
	if strings.EqualFold(strings.TrimSpace(cs), "hz-gb-2312") {
		// RFC 1843's Chinese mail, which the table below reads as one
		// U+FFFD (a browser's guard, not a mail reader's). Its line
		// continuation is "~" and a line end, which mail writes CRLF: the
		// decoder knows "~\n" alone, and read "~\r" as a broken escape.
		return transform.NewReader(r, transform.Chain(crlfToLF{}, simplifiedchinese.HZGB2312.NewDecoder())), nil
	}
	// The table maps ISO-2022-KR and ISO-2022-CN (mail charsets: RFC 1557,
	// 1922) to its "replacement" encoding, which reads any text as one
	// U+FFFD: a browser's guard against script hidden in them. A mail in
	// one was sent as the SMS "\uFFFD"; with no decoder for them here, it
	// is a charset the server cannot read, refused as an unknown one.
	enc, name := charset.Lookup(cs)
	if enc == nil || name == "replacement" {
		return nil, fmt.Errorf("the charset %q is not known", cs)
	}
	return transform.NewReader(r, enc.NewDecoder()), nil
}

// crlfToLF turns CRLF line ends into LF; any other CR stays.
type crlfToLF struct{ transform.NopResetter }

func (crlfToLF) Transform(dst, src []byte, atEOF bool) (nDst, nSrc int, err error) {
	for nSrc < len(src) {
		c := src[nSrc]
		if c == '\r' {
			if nSrc+1 == len(src) && !atEOF {
				return nDst, nSrc, transform.ErrShortSrc // an LF may follow
			}
			if nSrc+1 < len(src) && src[nSrc+1] == '\n' {
				nSrc++
				continue
			}
		}
		if nDst == len(dst) {
			return nDst, nSrc, transform.ErrShortDst
		}
		dst[nDst] = c
		nDst++
		nSrc++
	}
	return nDst, nSrc, nil
}

// layout turns no-break spaces into spaces and drops U+FEFF, a byte-order
// mark (Windows editors start UTF-8 with one) or the deprecated zero-width
// no-break space, wherever it came from: the part's bytes, HTML's &#xFEFF;,
// the subject. In mail they are layout: HTML is full of &nbsp;, Outlook
// carries them into its plain part, macOS writes U+202F before AM and PM.
// None is in the GSM alphabet, so one of them made the whole SMS UCS-2, 70
// characters a part instead of 160; an SMS has no line to keep together.
var layout = strings.NewReplacer("\u00a0", " ", "\u202f", " ", "\u2007", " ", byteOrderMark, "")

// byteOrderMark is U+FEFF, which layout drops from the SMS.
const byteOrderMark = "\uFEFF"

// dropBOM is s without its byte-order marks, for a reading that must not
// see them before layout drops them.
func dropBOM(s string) string { return strings.ReplaceAll(s, byteOrderMark, "") }

// newlineSkipper drops the line breaks of base64 text, which the standard
// decoder refuses.
type newlineSkipper struct{ r io.Reader }

func (s *newlineSkipper) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	out := p[:0]
	for _, b := range p[:n] {
		if b != '\r' && b != '\n' && b != ' ' && b != '\t' {
			out = append(out, b)
		}
	}
	return len(out), err
}

// skipped are the HTML elements whose content is not the message: scripts,
// styles, templates (which nothing shows), and blockquote, which mail
// clients wrap quoted replies in. The head is left out too (htmlText), up
// to where a browser ends it.
var skipped = map[string]bool{"script": true, "style": true, "title": true, "blockquote": true, "template": true}

// headContent are the elements a head holds (HTML's "in head" insertion
// mode). HTML may leave the head's end tag out: any other start tag (the
// body's, a <div>), or text that is not white space, ends the head as a
// browser reads it, and is shown. Read as an element that ends only at
// </head>, such a mail's whole text was left out.
var headContent = map[string]bool{"base": true, "basefont": true, "bgsound": true, "link": true, "meta": true,
	"title": true, "noscript": true, "noframes": true, "style": true, "script": true, "template": true, "head": true}

// headEnds are the end tags that end a head whose own end tag is left out.
var headEnds = map[string]bool{"head": true, "body": true, "html": true, "br": true}

// hideable are the elements whose content is left out when their style
// (display:none) or their hidden attribute hides them: those a template
// wraps its hidden preheader in (the preview's line, padded with
// zero-width characters), whose end tag
// HTML never leaves out, so that the content ends where the element does.
var hideable = map[string]bool{"div": true, "span": true, "table": true, "center": true, "font": true, "section": true,
	"header": true, "footer": true, "article": true, "aside": true}

// hidden reports whether an element's style attribute hides it, or its
// hidden attribute (which a browser's own style sheet makes display:none).
func hidden(attrs map[string]string) bool {
	if _, ok := attrs["hidden"]; ok {
		return true
	}
	style := strings.ToLower(strings.Join(strings.Fields(attrs["style"]), ""))
	return strings.Contains(style, "display:none")
}

// cells are the table cells, which a space separates from what precedes
// them on their row.
var cells = map[string]bool{"td": true, "th": true}

// blocks are the HTML elements that start a line and end it, and the line
// breaks a browser shows around them: 2 for those its style sheet gives a
// margin (a paragraph, a heading, a list as a whole: a blank line), 1 for
// the others (one line each: the rows of a table, the items of a list, a
// template's <div>s). Breaks do not add up: a block after another shows
// the larger of theirs, as margins collapse.
var blocks = map[string]int{"p": 2, "div": 1, "tr": 1, "li": 1, "ul": 2, "ol": 2, "table": 1,
	"h1": 2, "h2": 2, "h3": 2, "h4": 2, "h5": 2, "h6": 2, "pre": 2, "hr": 2}

// preformatted are the elements whose text a browser shows with its line
// breaks (and spaces) as written: a command's output or a stack trace in an
// alert's <pre>.
var preformatted = map[string]bool{"pre": true, "textarea": true, "listing": true}

// spaces are runs of HTML white space, one space in the rendered text.
var spaces = regexp.MustCompile(`[ \t\r\n\f]+`)

// HTMLText renders HTML as plain text: the text of the elements, a line
// break for <br> and around block elements, a web link's address after its
// text, nothing of scripts, styles and blockquotes (quoted replies), and
// Gmail's and Outlook's quote containers (gmail_quote, divRplyFwdMsg) with
// all that follows them.
func HTMLText(src string) string { return htmlText(src, true) }

// htmlText is HTMLText, with the addresses of links when links is set.
func htmlText(src string, links bool) string {
	z := html.NewTokenizer(strings.NewReader(src))
	var b strings.Builder
	skip := 0 // depth inside skipped elements
	// Whether the text is in the head (headContent), which shows nothing.
	head := false
	// The hidden element the text is in (display:none), and the depth of
	// its name's elements in it.
	hiding, hideDepth := "", 0
	// spaced says whether b ends in white space, which a space after it
	// would only repeat: a browser shows one.
	spaced := func() bool {
		s := b.String()
		return s == "" || s[len(s)-1] == ' ' || s[len(s)-1] == '\n'
	}
	// breakLines ends b with n line breaks, counting those it ends with:
	// nothing before the first text.
	breakLines := func(n int) {
		s := b.String()
		if s == "" {
			return
		}
		for i := len(s) - 1; i >= 0 && s[i] == '\n' && n > 0; i-- {
			n--
		}
		for ; n > 0; n-- {
			b.WriteByte('\n')
		}
	}
	// The open link: its address, and where its text starts in b.
	href, linkAt := "", 0
	// endLink ends the open link. A link's address is what an SMS reader
	// can act on ("View dashboard" is no use without it): it follows the
	// link's text, unless that text is the address, or the link shows no
	// text (a logo). A link ends at its end tag, and also where a browser
	// ends one whose end tag is missing: at the next link's start tag (a
	// link holds no link), or at the end of the HTML; the address of a
	// link left open was lost.
	endLink := func() {
		if href == "" {
			return
		}
		if text := strings.TrimSpace(b.String()[linkAt:]); text != "" && bareURL(text) != bareURL(href) {
			// After a text that ends in a space (<a>View </a>now), the
			// address takes the space's place and gives it back after
			// itself: "View (...) now", not "View  (...)now".
			if s := b.String(); s[len(s)-1] == ' ' {
				b.WriteString("(" + href + ") ")
			} else {
				b.WriteString(" (" + href + ")")
			}
		}
		href = ""
	}
	// The depth inside preformatted elements, whose line breaks a browser
	// shows as written, and whether their first text is still to come (a
	// line break right after <pre> is not shown).
	pre, preFirst := 0, false
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			endLink()
			return lineTrimmed(b.String())
		case html.TextToken:
			raw := string(z.Text())
			if head && skip == 0 && strings.Trim(raw, " \t\r\n\f") != "" {
				head = false
			}
			if skip == 0 && hideDepth == 0 && !head && pre > 0 {
				text := strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\r", "\n")
				if preFirst {
					text, preFirst = strings.TrimPrefix(text, "\n"), false
				}
				b.WriteString(text)
			} else if skip == 0 && hideDepth == 0 && !head {
				text := spaces.ReplaceAllString(raw, " ")
				if strings.HasPrefix(text, " ") && spaced() {
					text = text[1:]
				}
				b.WriteString(text)
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			attrs := tagAttrs(z, hasAttr)
			if hideDepth > 0 {
				if tag == hiding && tt == html.StartTagToken {
					hideDepth++
				}
				continue
			}
			if head && !headContent[tag] {
				head = false
			}
			if tag == "head" && tt == html.StartTagToken && skip == 0 && b.Len() == 0 {
				head = true
			}
			if quoteContainer(attrs) {
				endLink()
				return lineTrimmed(b.String())
			}
			if hideable[tag] && tt == html.StartTagToken && hidden(attrs) {
				hiding, hideDepth = tag, 1
				continue
			}
			if tag == "a" && tt == html.StartTagToken {
				endLink()
			}
			// A browser strips the white space around an address
			// (a template's href="{{ url }} ").
			if a := strings.Trim(attrs["href"], " \t\n\f\r"); links && tag == "a" && skip == 0 && tt == html.StartTagToken && webAddress(a) {
				href, linkAt = a, b.Len()
			}
			if skipped[tag] && tt == html.StartTagToken {
				skip++
			}
			if preformatted[tag] && tt == html.StartTagToken {
				pre, preFirst = pre+1, true
			}
			if tag == "br" {
				b.WriteByte('\n')
			} else if n := blocks[tag]; n > 0 && skip == 0 {
				breakLines(n)
			}
			if cells[tag] && skip == 0 && !spaced() {
				b.WriteByte(' ')
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			if hideDepth > 0 {
				if string(name) == hiding {
					hideDepth--
				}
				continue
			}
			if head && headEnds[string(name)] {
				head = false
			}
			if skipped[string(name)] && skip > 0 {
				skip--
			}
			if preformatted[string(name)] && pre > 0 {
				pre--
			}
			if string(name) == "a" {
				endLink()
			}
			if n := blocks[string(name)]; n > 0 && skip == 0 {
				breakLines(n)
			}
		}
	}
}

// lineTrimmed trims the space around each line that rendering left.
func lineTrimmed(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

// tagAttrs reads the attributes of the tag just read (the first of a name).
func tagAttrs(z *html.Tokenizer, hasAttr bool) map[string]string {
	attrs := map[string]string{}
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		if _, seen := attrs[string(k)]; !seen {
			attrs[string(k)] = string(v)
		}
	}
	return attrs
}

// quoteContainer reports whether a tag with these attributes opens a mail
// client's quoted thread: Gmail's class gmail_quote, Outlook's id divRplyFwdMsg.
func quoteContainer(attrs map[string]string) bool {
	return strings.Contains(attrs["class"], "gmail_quote") || attrs["id"] == "divRplyFwdMsg"
}

// webAddress reports whether a link's href is an http or https address,
// the links worth an SMS's characters (not mailto:, tel:, javascript:...).
func webAddress(href string) bool {
	l := strings.ToLower(href)
	return strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://")
}

// bareURL is an address without its scheme and trailing slash, to tell
// whether a link's text already shows its address; a byte-order mark in
// the text (layout drops it from the SMS) is not part of what it shows.
func bareURL(s string) string {
	l := strings.ToLower(dropBOM(s))
	for _, p := range []string{"https://", "http://"} {
		l = strings.TrimPrefix(l, p)
	}
	return strings.TrimSuffix(l, "/")
}

// attribution is the line a client writes above a quoted reply
// ("On Tue, 3 Mar 2026, Ann <ann@example.com> wrote:").
var attribution = regexp.MustCompile(`(?i)^(on\s.*\swrote:|.*\s(wrote|schrieb|a écrit|escribió)\s?:)$`)

// Clean cuts what is not the message from a mail's text: the signature
// (from a line that is "-- " or "--", white space around it aside), an
// Outlook quoted thread (from "-----Original Message-----" or a line
// "From: ..." after a line of underscores), quoted lines (starting with
// ">") with the attribution line above them; then it trims trailing space
// from lines, the whole text, and runs of blank lines to one. What it
// returns is message only: Clean of it is itself.
func Clean(text string) string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(text, "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " \t\r")
		trim := strings.TrimSpace(l)
		// The separator is read without the white space around it, as the
		// other marks are. As written, "--\t" (or " --" starting the text)
		// was no separator but came out as "--", which is one: cleaning the
		// text again cut what the first pass had kept as message.
		if trim == "--" ||
			strings.HasPrefix(trim, "-----Original Message-----") || strings.HasPrefix(trim, "________________________________") {
			break
		}
		if strings.HasPrefix(trim, ">") {
			// Drop the attribution above this quote, and blank lines between.
			for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
				out = out[:len(out)-1]
			}
			if len(out) > 0 && attribution.MatchString(strings.TrimSpace(out[len(out)-1])) {
				out = out[:len(out)-1]
			}
			continue
		}
		out = append(out, l)
	}
	text = strings.TrimSpace(strings.Join(out, "\n"))
	for strings.Contains(text, "\n\n\n") {
		text = strings.ReplaceAll(text, "\n\n\n", "\n\n")
	}
	return text
}
