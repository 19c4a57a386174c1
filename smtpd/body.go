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
	// Header is the message's header as given (continuation lines
	// joined): its Date, From, To, Cc and Subject make the key of a mail
	// without a Message-ID (see the session's mailKey).
	Header mail.Header
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
	return Mail{Text: text, MessageID: strings.TrimSpace(msg.Header.Get("Message-ID")), Header: msg.Header}, nil
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

// The open elements (htmlText's stack), as far as a browser's parser keeps
// them for what the text shows: where an element whose end tag is left
// out ends (a hidden preheader's <div>, a link, a blockquote), the end tag
// of an element that holds it, or a start tag that closes it, ends it
// too, as the parser pops it off its stack of open elements. An unclosed
// hidden <div> in a table cell hid the rest of the mail; a browser ends
// it with the cell.

// voidElements have no content and no end tag: never open.
var voidElements = map[string]bool{"area": true, "base": true, "basefont": true, "bgsound": true, "br": true, "col": true,
	"embed": true, "frame": true, "hr": true, "img": true, "image": true, "input": true, "keygen": true, "link": true,
	"meta": true, "param": true, "source": true, "track": true, "wbr": true}

// special are HTML's special elements: an end tag of another name that
// meets one of them, looking down the open elements for its own, is
// ignored, and a formatting element's end tag closes it without them.
var special = map[string]bool{"address": true, "applet": true, "area": true, "article": true, "aside": true, "base": true,
	"basefont": true, "bgsound": true, "blockquote": true, "body": true, "br": true, "button": true, "caption": true,
	"center": true, "col": true, "colgroup": true, "dd": true, "details": true, "dir": true, "div": true, "dl": true,
	"dt": true, "embed": true, "fieldset": true, "figcaption": true, "figure": true, "footer": true, "form": true,
	"frame": true, "frameset": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true, "head": true,
	"header": true, "hgroup": true, "hr": true, "html": true, "iframe": true, "img": true, "input": true, "keygen": true,
	"li": true, "link": true, "listing": true, "main": true, "marquee": true, "menu": true, "meta": true, "nav": true,
	"noembed": true, "noframes": true, "noscript": true, "object": true, "ol": true, "p": true, "param": true,
	"plaintext": true, "pre": true, "script": true, "search": true, "section": true, "select": true, "source": true,
	"style": true, "summary": true, "table": true, "tbody": true, "td": true, "template": true, "textarea": true,
	"tfoot": true, "th": true, "thead": true, "title": true, "tr": true, "track": true, "ul": true, "wbr": true, "xmp": true}

// formatting are the formatting elements, whose end tag closes them even
// across the special elements opened in them (the adoption agency).
var formatting = map[string]bool{"a": true, "b": true, "big": true, "code": true, "em": true, "font": true, "i": true,
	"nobr": true, "s": true, "small": true, "strike": true, "strong": true, "tt": true, "u": true}

// The classes of elements that the lookups of the open elements ask of
// them (element.class), each a bit.
const (
	// classSpecial: HTML's special elements (special).
	classSpecial uint16 = 1 << iota
	// classScopeEnd: the elements an end tag does not look past for its
	// element (HTML's "has an element in scope"): a </div> in a table cell
	// does not close a <div> the table is in.
	classScopeEnd
	// classTableScopeEnd: those the table's own end tags do not look past
	// (a </td> looks past anything but a table).
	classTableScopeEnd
	classButton
	classList    // ol, ul
	classHeading // h1 to h6
	classCell    // td, th
	classSection // tbody, thead, tfoot
	classTerm    // dd, dt
	// classItemPast: the special elements a list item's start looks
	// past for the item it ends.
	classItemPast
)

// elementClasses are the classes of the elements of some: the others'
// are their special bit alone.
var elementClasses = map[string]uint16{
	"applet": classScopeEnd, "caption": classScopeEnd, "marquee": classScopeEnd, "object": classScopeEnd,
	"td": classScopeEnd | classCell, "th": classScopeEnd | classCell,
	"html": classScopeEnd | classTableScopeEnd, "table": classScopeEnd | classTableScopeEnd, "template": classScopeEnd | classTableScopeEnd,
	"button": classButton, "ol": classList, "ul": classList,
	"h1": classHeading, "h2": classHeading, "h3": classHeading, "h4": classHeading, "h5": classHeading, "h6": classHeading,
	"tbody": classSection, "thead": classSection, "tfoot": classSection, "dd": classTerm, "dt": classTerm,
	"address": classItemPast, "div": classItemPast, "p": classItemPast,
}

// classOf is the classes of an element.
func classOf(tag string) uint16 {
	c := elementClasses[tag]
	if special[tag] {
		c |= classSpecial
	}
	return c
}

// closesP are the start tags that close an open paragraph.
var closesP = map[string]bool{"address": true, "article": true, "aside": true, "blockquote": true, "center": true,
	"details": true, "dialog": true, "dir": true, "div": true, "dl": true, "fieldset": true, "figcaption": true,
	"figure": true, "footer": true, "form": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"header": true, "hgroup": true, "hr": true, "li": true, "dd": true, "dt": true, "listing": true, "main": true,
	"menu": true, "nav": true, "ol": true, "p": true, "plaintext": true, "pre": true, "search": true, "section": true,
	"summary": true, "ul": true, "xmp": true}

// maxLookDown bounds how far down the open elements a tag looks for the
// one it closes; one further down is left open, as if out of scope. Real
// mail nests some tens of elements; a crafted one of many thousands
// unclosed costs this much a tag, not their number.
const maxLookDown = 256

// element is an open element, and what its end ends.
type element struct {
	tag   string
	class uint16 // classOf(tag)
	hide  bool   // it hides its content (hidden)
	skip  bool   // its content is no message (skipped)
	pre   bool   // it is preformatted
	link  int    // the link it opened (htmlText's linkID), 0 for none
}

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
	// Where the open element that hides its content (display:none) is in
	// the open elements (-1: none): the text in it shows nothing, and an
	// element in it is not read as hiding, so there is one at most.
	hideAt := -1
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
	// The open link: its address, where its text starts in b, and its
	// number among the links (its element's link).
	href, linkAt, linkID := "", 0, 0
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
	// The open elements, the innermost last.
	var open []element
	// closed ends what the element e ended.
	closed := func(e element) {
		if e.hide {
			hideAt = -1
		}
		if e.skip {
			skip--
		}
		if e.pre {
			pre--
		}
		if e.link != 0 && e.link == linkID {
			endLink()
		}
	}
	// popTo closes the open elements from the innermost to the one at i.
	popTo := func(i int) {
		for len(open) > i {
			e := open[len(open)-1]
			open = open[:len(open)-1]
			closed(e)
		}
	}
	// find is where the innermost open element of the name tag, or of a
	// class of match, is, looking down no further than an element of a
	// class of stop but none of pass (nor maxLookDown): -1 for none.
	find := func(tag string, match, stop, pass uint16) int {
		for i := len(open) - 1; i >= 0 && i >= len(open)-maxLookDown; i-- {
			e := &open[i]
			if (tag != "" && e.tag == tag) || e.class&match != 0 {
				return i
			}
			if e.class&stop != 0 && e.class&pass == 0 {
				return -1
			}
		}
		return -1
	}
	// closeTo closes the element find finds, with all opened in it, and
	// says where it was (-1: none closed).
	closeTo := func(tag string, match, stop, pass uint16) int {
		i := find(tag, match, stop, pass)
		if i >= 0 {
			popTo(i)
		}
		return i
	}
	// remove takes the open element at i out of the open elements,
	// leaving those opened in it open.
	remove := func(i int) {
		e := open[i]
		open = append(open[:i], open[i+1:]...)
		if hideAt > i {
			hideAt--
		}
		closed(e)
	}
	// startCloses closes what a start tag of tag ends, as HTML's parser
	// does: a cell, row or table section the next one's start ends, an
	// open paragraph a block's start ends, a list item the next one's.
	startCloses := func(tag string) {
		switch tag {
		case "td", "th", "tr", "tbody", "thead", "tfoot", "caption", "colgroup":
			closeTo("", classCell, classTableScopeEnd, 0)
			if tag != "td" && tag != "th" {
				closeTo("tr", 0, classTableScopeEnd, 0)
			}
			if tag != "td" && tag != "th" && tag != "tr" {
				closeTo("", classSection, classTableScopeEnd, 0)
			}
			return
		}
		if closesP[tag] {
			closeTo("p", 0, classScopeEnd|classButton, 0)
		}
		switch {
		case tag == "li":
			closeTo("li", 0, classSpecial, classItemPast)
		case tag == "dd" || tag == "dt":
			closeTo("", classTerm, classSpecial, classItemPast)
		case classOf(tag)&classHeading != 0 && len(open) > 0 && open[len(open)-1].class&classHeading != 0:
			popTo(len(open) - 1)
		case tag == "a":
			// A link in a link: the open one ends here (endLink), and its
			// element leaves the open elements, where it stands.
			if i := find("a", 0, classScopeEnd, 0); i >= 0 {
				remove(i)
			}
		}
	}
	// endCloses closes what an end tag of tag ends, and says where the
	// element it closed was (-1: none).
	endCloses := func(tag string) int {
		switch {
		case tag == "body" || tag == "html" || tag == "br":
			// </body> and </html> close nothing a browser shows after them.
			return -1
		case tag == "td" || tag == "th" || tag == "tr" || tag == "tbody" || tag == "thead" || tag == "tfoot" || tag == "caption" || tag == "table":
			return closeTo(tag, 0, classTableScopeEnd, 0)
		case tag == "p":
			return closeTo(tag, 0, classScopeEnd|classButton, 0)
		case tag == "li":
			return closeTo(tag, 0, classScopeEnd|classList, 0)
		case classOf(tag)&classHeading != 0:
			return closeTo("", classHeading, classScopeEnd, 0)
		case formatting[tag]:
			// The adoption agency, as far as the text goes: the element
			// closes with what was opened in it, but for the special
			// elements, which stay open without it.
			i := find(tag, 0, classScopeEnd, 0)
			if i < 0 {
				return -1
			}
			furthest := false
			for _, e := range open[i+1:] {
				furthest = furthest || e.class&classSpecial != 0
			}
			if !furthest {
				popTo(i)
				return i
			}
			remove(i)
			return i
		case special[tag]:
			return closeTo(tag, 0, classScopeEnd, 0)
		default:
			return closeTo(tag, 0, classSpecial, 0)
		}
	}

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
			if skip == 0 && hideAt < 0 && !head && pre > 0 {
				text := strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\r", "\n")
				if preFirst {
					text, preFirst = strings.TrimPrefix(text, "\n"), false
				}
				b.WriteString(text)
			} else if skip == 0 && hideAt < 0 && !head {
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
			// A self-closing tag is read as closed: none opens anything.
			opens := tt == html.StartTagToken && !voidElements[tag]
			if tt == html.StartTagToken {
				startCloses(tag)
			}
			if hideAt >= 0 {
				if opens {
					open = append(open, element{tag: tag, class: classOf(tag)})
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
			if hideable[tag] && opens && hidden(attrs) {
				hideAt = len(open)
				open = append(open, element{tag: tag, class: classOf(tag), hide: true})
				continue
			}
			e := element{tag: tag, class: classOf(tag)}
			if tag == "a" && tt == html.StartTagToken {
				endLink()
			}
			// A browser strips the white space around an address
			// (a template's href="{{ url }} ").
			if a := strings.Trim(attrs["href"], " \t\n\f\r"); links && tag == "a" && skip == 0 && tt == html.StartTagToken && webAddress(a) {
				linkID++
				href, linkAt, e.link = a, b.Len(), linkID
			}
			if skipped[tag] && opens {
				skip, e.skip = skip+1, true
			}
			if preformatted[tag] && opens {
				pre, preFirst, e.pre = pre+1, true, true
			}
			if opens {
				open = append(open, e)
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
			// An end tag in hidden content shows nothing, but one that
			// closes an element holding the hidden one (a </td>, a </tr>)
			// ends it and shows its own break.
			hid := hideAt
			if at := endCloses(string(name)); hid >= 0 && (at < 0 || at >= hid) {
				continue
			}
			if head && headEnds[string(name)] {
				head = false
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
