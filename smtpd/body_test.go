package smtpd

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadMail(t *testing.T) {
	t.Parallel()
	crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
	for _, tc := range readMailCases {
		m, err := ReadMail([]byte(crlf(tc.raw)))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if m.Text != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, m.Text, tc.want)
		}
	}
	if _, err := ReadMail([]byte(crlf("Subject: x\nContent-Type: image/png\n\nxx\n"))); err == nil {
		t.Error("a mail without text: got no error")
	}
}

// The labels that browsers' encoding table maps to its "replacement"
// encoding (ISO-2022-KR, HZ-GB-2312, ISO-2022-CN: mail charsets of RFC 1557,
// RFC 1843 and RFC 1922) decode any text to a single U+FFFD. Read so, a
// Korean mail was sent as the SMS "\uFFFD" and its sender told 250: such a
// charset is one the server cannot read, refused as an unknown one, and a
// subject in it stays as written. HZ-GB-2312 is read (readMailCases).
func TestReadMailReplacementCharsets(t *testing.T) {
	t.Parallel()
	crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
	for _, cs := range []string{"iso-2022-kr", "csISO2022KR", "iso-2022-cn", "iso-2022-cn-ext", "replacement"} {
		m, err := ReadMail([]byte(crlf("Subject: x\nContent-Type: text/plain; charset=" + cs + "\n\n\x1b$)C\x0e!!\x0f hello\n")))
		if err == nil || !strings.Contains(err.Error(), "not known") {
			t.Errorf("a body in %s: got %q, %v; want the charset refused", cs, m.Text, err)
		}
		m, err = ReadMail([]byte(crlf("Subject: =?" + cs + "?q?hi?=\n\n\n")))
		if want := "=?" + cs + "?q?hi?="; err != nil || m.Text != want {
			t.Errorf("a subject in %s: got %q, %v; want %q", cs, m.Text, err, want)
		}
	}
}

// readMailCases are mails and the SMS text each gives; FuzzReadMail starts
// from them too.
var readMailCases = []struct {
	name, raw, want string
}{
	{"plain", "Subject: hi\n\nHello there.\n", "Hello there."},
	{"no content type, signature cut", "Subject: x\n\nSee you at 8.\n-- \nAnn\n", "See you at 8."},
	{"quoted reply and attribution cut", "Subject: x\n\nYes, 8 works.\n\nOn Mon, 2 Mar 2026 at 10:00, Bob <b@x.test> wrote:\n> Does 8 work?\n> Bob\n", "Yes, 8 works."},
	{"outlook thread cut", "Subject: x\n\nOK.\n\n-----Original Message-----\nFrom: Bob\nQuestion\n", "OK."},
	{"blank lines collapsed", "Subject: x\n\nOne\n\n\n\nTwo\n", "One\n\nTwo"},
	{"empty body takes the subject", "Subject: =?UTF-8?Q?Caf=C3=A9_at_8?=\n\n\n", "Café at 8"},
	// A byte-order mark is no text: kept, its U+FEFF would make every
	// such SMS UCS-2, at 70 characters a part instead of 160.
	{"utf-8 with a byte-order mark", "Subject: x\nContent-Type: text/plain; charset=utf-8\n\n\xef\xbb\xbfCafé at 8\n", "Café at 8"},
	{"html with a byte-order mark", "Subject: x\nContent-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\n=EF=BB=BF<p>Hi</p>\n", "Hi"},
	{"utf-16, little-endian by its mark", "Subject: x\nContent-Type: text/plain; charset=utf-16\nContent-Transfer-Encoding: base64\n\n//5oAOkAbABsAG8A\n", "héllo"},
	{"utf-16, big-endian by its mark", "Subject: x\nContent-Type: text/plain; charset=UTF-16\nContent-Transfer-Encoding: base64\n\n/v8AaADpAGwAbABv\n", "héllo"},
	// A subject in an encoded word is read in the charsets a body is:
	// Japanese mail writes ISO-2022-JP, Outlook windows-1252. It used to
	// go out as its raw =?charset?...?= text.
	{"subject in iso-2022-jp", "Subject: =?ISO-2022-JP?B?GyRCJDMkcyRLJEEkTxsoQg==?=\n\n\n", "こんにちは"},
	{"subject in windows-1252", "Subject: =?windows-1252?q?Gr=FC=DFe?= =?koi8-r?b?8NLJ18XU?=\n\n\n", "GrüßeПривет"},
	{"subject with a byte-order mark", "Subject: =?utf-8?b?77u/aGk=?=\n\n\n", "hi"},
	{"subject in utf-16", "Subject: =?utf-16?b?//5oAGkA?=\n\n\n", "hi"},
	// HZ-GB-2312 (RFC 1843, 7-bit Chinese mail): ~{ and ~} switch GB2312
	// on and off, ~~ is a tilde, and ~ at a line's end (CRLF in mail)
	// joins it to the next.
	{"hz-gb-2312, RFC 1843's example", "Subject: x\nContent-Type: text/plain; charset=HZ-GB-2312\n\nThe next sentence is in GB.~{<:Ky2;S{#,NpJ)l6HK!#~}Bye.\n", "The next sentence is in GB.己所不欲，勿施於人。Bye."},
	{"hz-gb-2312, a line continued and a tilde", "Subject: x\nContent-Type: text/plain; charset=\"hz-gb-2312\"\n\n~{4EELRQBz~} ~~90%: ~{;aRi8D5=~}~\n~{OBNgH}5c!#~}\n", "磁盘已满 ~90%: 会议改到下午三点。"},
	{"subject in hz-gb-2312", "Subject: =?HZ-GB-2312?B?fns3fk5xRnc=?=\n\n\n", "服务器"},
	{"subject in an unknown charset stays as written", "Subject: =?x-bogus?q?hi?=\n\n\n", "=?x-bogus?q?hi?="},
	// format=flowed (RFC 3676, Thunderbird's and Apple Mail's plain
	// text): a line ending in a space goes on in the next, so a
	// paragraph wrapped at 72 columns is one line of the SMS again.
	{"format=flowed joins soft breaks", "Subject: x\nContent-Type: text/plain; charset=utf-8; format=flowed\n\nHello, this is a long message that the mail client \nwrapped at seventy-two columns.\nA hard break stays.\n \n  Stuffed line.\n-- \nAnn \n", "Hello, this is a long message that the mail client wrapped at seventy-two columns.\nA hard break stays.\n\n Stuffed line."},
	{"format=flowed, a signature after a soft break is cut", "Subject: x\nContent-Type: text/plain; format=flowed\n\nThanks, \n-- \nAnn \nAcme\n", "Thanks,"},
	{"format=flowed with delsp", "Subject: x\nContent-Type: text/plain; charset=utf-8; format=\"flowed\"; delsp=yes\n\nこんにちは \n世界\n", "こんにちは世界"},
	{"format=flowed, quoted lines keep their own flow", "Subject: x\nContent-Type: text/plain; format=flowed\n\nYes \nplease.\n\nOn Mon, Bob wrote:\n> Shall \n> we?\n", "Yes please."},
	{"no format=flowed: a trailing space is no join", "Subject: x\n\nOne \nTwo\n", "One\nTwo"},
	// No-break spaces are layout: HTML mail is full of &nbsp;, Outlook
	// carries them into its plain part, macOS puts U+202F before AM/PM.
	// None is in the GSM alphabet, so one made the whole SMS UCS-2.
	{"no-break spaces in html are spaces", "Subject: x\nContent-Type: text/html; charset=utf-8\n\n<p>Hello&nbsp;there,&nbsp;&nbsp;Ann</p><p>&nbsp;</p><p>See you at 10:00&#x202F;AM</p>\n", "Hello there,  Ann\n\nSee you at 10:00 AM"},
	{"no-break spaces in plain text are spaces", "Subject: x\nContent-Type: text/plain; charset=utf-8\n\nTotal:\u00a042\u2007EUR\u00a0\n", "Total: 42 EUR"},
	// A link's address is the part an SMS reader can act on: an alert
	// mail's "View dashboard" is no use without it.
	{"html link keeps its address", "Subject: x\nContent-Type: text/html\n\n<p>Disk full. <a href=\"https://grafana.example.com/d/1?x=1&amp;y=2\">View <b>dashboard</b></a></p>\n", "Disk full. View dashboard (https://grafana.example.com/d/1?x=1&y=2)"},
	{"html link that shows its address, once", "Subject: x\nContent-Type: text/html\n\n<a href=\"https://example.com/a\">https://example.com/a</a> and <a href=\"http://example.com/b/\">example.com/b</a>\n", "https://example.com/a and example.com/b"},
	{"html links that are no web address, or show nothing", "Subject: x\nContent-Type: text/html\n\n<a href=\"mailto:a@example.com\">Write</a> <a href=\"javascript:x()\">us</a><a href=\"https://example.com/logo\"><img src=\"logo.png\"></a>\n", "Write us"},
	{"links' addresses left out when they would pass 1,600 characters", "Subject: x\nContent-Type: text/html\n\n<p>" + strings.Repeat("a", 1500) + " <a href=\"https://example.com/" + strings.Repeat("t", 200) + "\">link</a></p>\n", strings.Repeat("a", 1500) + " link"},
	{"utf-16 without a mark is big-endian (RFC 2781)", "Subject: x\nContent-Type: text/plain; charset=utf-16\nContent-Transfer-Encoding: base64\n\nAGgA6QBsAGwAbw==\n", "héllo"},
	{"alternative prefers plain", "Subject: x\nMIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/html\n\n<p>HTML</p>\n--b\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\nCaf=C3=A9 plain\n--b--\n", "Café plain"},
	// Django's EmailMultiAlternatives with an empty body, and other senders
	// that fill only the HTML, send a text/plain alternative with nothing
	// in it: the HTML is the mail's text, not the subject.
	{"alternative with an empty plain part takes the html", "Subject: Login\nMIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/plain; charset=utf-8\n\n\n--b\nContent-Type: text/html; charset=utf-8\n\n<p>Your code is 4711</p>\n--b--\n", "Your code is 4711"},
	{"alternative with a blank plain part takes the html", "Subject: Login\nMIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/plain; charset=utf-8\n\n  \xe2\x80\x8b \n\n--b\nContent-Type: text/html; charset=utf-8\n\n<p>Your code is 4711</p>\n--b--\n", "Your code is 4711"},
	{"alternative with nothing in either takes the subject", "Subject: Login\nMIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/plain\n\n\n--b\nContent-Type: text/html\n\n<p> </p>\n--b--\n", "Login"},
	// A file is not the mail's text: a part that names one is an
	// attachment whatever its disposition (Apple Mail attaches with
	// "inline; filename=", older programs with a Content-Type name alone).
	{"text file inline with a filename is no text", "Subject: x\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/html\n\n<p>Backup failed on db1</p>\n--b\nContent-Type: text/plain\nContent-Disposition: inline; filename=\"backup.log\"\n\nerror: disk full\n--b--\n", "Backup failed on db1"},
	{"text file named by its Content-Type is no text", "Subject: x\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/html\n\n<p>Backup failed on db1</p>\n--b\nContent-Type: text/plain; name=\"backup.log\"\n\nerror: disk full\n--b--\n", "Backup failed on db1"},
	{"text file with an RFC 2231 filename is no text", "Subject: x\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\nContent-Disposition: inline; filename*=utf-8''r%C3%A9sum%C3%A9.txt\n\nfile\n--b\nContent-Type: text/html\n\n<p>Report attached.</p>\n--b--\n", "Report attached."},
	{"a mail of one named part is its text", "Subject: x\nContent-Type: text/plain; name=\"note.txt\"\nContent-Disposition: inline; filename=\"note.txt\"\n\nCall me\n", "Call me"},
	// A multipart mail whose closing boundary is missing (MIME written by
	// hand in a script) is read as mail programs show it: to its end.
	{"no closing boundary", "Subject: x\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nBackup failed on db1\n", "Backup failed on db1"},
	{"no closing boundary, base64", "Subject: x\nMIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\nQ2Fmw6kgYXQgOA==\n", "Caf\u00e9 at 8"},
	{"no closing boundary after a file", "Subject: x\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nGraph attached\n--b\nContent-Type: image/png\nContent-Transfer-Encoding: base64\n\niVBORw0KGgo=\n", "Graph attached"},
	{"no closing boundary, nested", "Subject: x\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=o\n\n--o\nContent-Type: multipart/alternative; boundary=i\n\n--i\nContent-Type: text/html\n\n<p>Nested</p>\n", "Nested"},
	// A browser keeps the line breaks of preformatted text: a monitoring
	// system's alert in <pre> (a command's output, a stack trace) was one line.
	{"html pre keeps its lines", "Subject: x\nContent-Type: text/html\n\n<p>Check failed:</p><pre>\nFilesystem  Use%\n/dev/sda1    97%\n\n/dev/sdb1    12%</pre><p>Fix it</p>\n", "Check failed:\n\nFilesystem  Use%\n/dev/sda1    97%\n\n/dev/sdb1    12%\n\nFix it"},
	{"html pre with markup inside", "Subject: x\nContent-Type: text/html\n\n<pre>a <b>bold</b>\n  b</pre>\n", "a bold\nb"},
	// The hidden attribute hides an element as display:none does (a
	// browser's own style sheet says so): a preheader written <span hidden>.
	{"html divs and list items one line each, paragraphs and lists apart", "Subject: x\nContent-Type: text/html\n\n<div>Disk full on db1</div><div>Used: 97%</div><p>Runbook:</p><ul><li>Rotate logs</li><li>Grow the volume</li></ul><p>Ops</p>\n", "Disk full on db1\nUsed: 97%\n\nRunbook:\n\nRotate logs\nGrow the volume\n\nOps"},
	{"html hidden attribute hides", "Subject: x\nContent-Type: text/html\n\n<span hidden>Preview: your weekly report</span><div hidden=\"hidden\">more preview</div><div>Disk full on db1</div>\n", "Disk full on db1"},
	// A browser strips the white space around a link's address (a
	// template's href="{{ url }} "): the address follows the text all the same.
	{"html link with spaces around its address", "Subject: x\nContent-Type: text/html\n\n<a href=\" https://grafana.example.com/d/1\n\">View</a>\n", "View (https://grafana.example.com/d/1)"},
	{"html only, quote container and script cut", "Subject: x\nContent-Type: text/html; charset=utf-8\n\n<html><head><style>p{}</style></head><body><p>Line &amp; one</p><div>two<br>three</div><script>x()</script><div class=\"gmail_quote\">On Mon wrote:<blockquote>old</blockquote></div></body></html>\n", "Line & one\n\ntwo\nthree"},
	{"base64 in a mixed mail, attachment skipped", "Subject: x\nContent-Type: multipart/mixed; boundary=m\n\n--m\nContent-Type: text/plain; name=a.txt\nContent-Disposition: attachment\n\nnot me\n--m\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\nSGVsbG8g\nd29ybGQ=\n--m--\n", "Hello world"},
	// Mails that broke FuzzReadMail's and FuzzClean's properties: a
	// subject's bytes that are not UTF-8 went into the SMS as they were
	// (PostgreSQL refuses such a text: a 451 fault), &#xFEFF; in HTML left
	// the byte-order mark a body's decoding drops, and "--" with a tab was
	// no separator, though the text left would have been cut read again.
	{"subject that is not utf-8", "Subject: caf\xe9 \xff\n\n\n", "caf\uFFFD \uFFFD"},
	{"html writing a byte-order mark", "Subject: x\nContent-Type: text/html\n\n<p>&#xFEFF;Hi&#65279;</p>\n", "Hi"},
	// A byte-order mark before a link's address, as the link's text, made
	// the address written twice.
	{"html link that shows its address after a byte-order mark", "Subject: x\nContent-Type: text/html\n\n<a href=\"https://example.com/a\">&#xFEFF;https://example.com/a</a> and <a href=\"https://example.com/b\">\xef\xbb\xbfexample.com/b</a>\n", "https://example.com/a and example.com/b"},
	// A flowed text led by a byte-order mark: its first line is still a
	// quote, whose soft break does not join the reply after it.
	{"format=flowed led by a byte-order mark", "Subject: x\nContent-Type: text/plain; charset=utf-8; format=flowed\n\n\xef\xbb\xbf> Shall we? \nYes, at 8.\n", "Yes, at 8."},
	{"signature separator with white space around it", "Subject: x\n\nSee you.\n--\t\nAnn\n", "See you."},
	{"latin-1", "Subject: x\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\nCaf=E9\n", "Café"},
	// HTML leaves the head's end tag out at will: the body's start tag, or
	// any content that belongs in no head, ends it, and a browser shows
	// what follows. Skipped to the end, the mail's text was lost (its SMS
	// the subject alone).
	{"html head whose end tag is left out", "Subject: Alert\nContent-Type: text/html\n\n<html><head><meta charset=utf-8><title>Alert</title><body><p>Disk full on db1</p></body></html>\n", "Disk full on db1"},
	{"html head ended by its content", "Subject: Alert\nContent-Type: text/html\n\n<head><style>p{color:red}</style><link rel=stylesheet href=a.css>\n<div>Disk full</div>\n", "Disk full"},
	// A link whose end tag is missing ends where a browser ends it: at the
	// next link (a link holds no link) or at the end; its address was lost.
	// It comes where the link ends, after the lines its text's block broke.
	{"html link left open keeps its address", "Subject: x\nContent-Type: text/html\n\n<p>Disk full. <a href=\"https://grafana.example.com/d/1\">View dashboard\n", "Disk full. View dashboard (https://grafana.example.com/d/1)"},
	// A link left open ends with the paragraph it is in, as a browser
	// pops it with the paragraph: its address follows its text, not the
	// paragraph's blank line.
	{"html link left open in a paragraph", "Subject: x\nContent-Type: text/html\n\n<p>Disk full. <a href=\"https://grafana.example.com/d/1\">View dashboard</p><p>Ops</p>\n", "Disk full. View dashboard (https://grafana.example.com/d/1)\n\nOps"},
	{"html link left open in a div", "Subject: x\nContent-Type: text/html\n\n<div>Disk full. <a href=\"https://grafana.example.com/d/1\">View</div>Ops\n", "Disk full. View (https://grafana.example.com/d/1)\nOps"},
	// A hidden preheader whose end tag is left out ends with the table
	// cell it is in (or the row, or the next cell), as a browser ends it:
	// it hid the rest of the mail.
	{"html hidden div left open in a table cell", "Subject: x\nContent-Type: text/html\n\n<table><tr><td><div style=\"display: none\">Your weekly report&zwnj;&nbsp;</td></tr><tr><td>Disk full on db1</td></tr></table><p>Ops</p>\n", "Disk full on db1\n\nOps"},
	{"html hidden span left open before the next cell", "Subject: x\nContent-Type: text/html\n\n<table><tr><td><span hidden>preview<td>Disk full on db1</table>\n", "Disk full on db1"},
	{"html hidden div left open in a row", "Subject: x\nContent-Type: text/html\n\n<table><tr><td>Disk full<div style=\"display:none\">preview</tr><tr><td>on db1</table>\n", "Disk full\non db1"},
	{"html blockquote left open in a table cell", "Subject: x\nContent-Type: text/html\n\n<table><tr><td><blockquote>old reply</td><td>Disk full on db1</td></tr></table>\n", "Disk full on db1"},
	// But a </div> does not reach out of the cell for a <div> the table
	// is in, and an end tag does not close a block opened in its element:
	// the hidden text stays hidden.
	{"html hidden div around a table", "Subject: x\nContent-Type: text/html\n\n<div hidden><table><tr><td>preview</div>still hidden</td></tr></table>also hidden</div><p>Disk full</p>\n", "Disk full"},
	{"html hidden span around a div", "Subject: x\nContent-Type: text/html\n\n<span hidden><div>preview</span>still hidden</div>also hidden</span><p>Disk full</p>\n", "Disk full"},
	{"html link whose text ends in a space", "Subject: x\nContent-Type: text/html\n\n<a href=\"https://example.com/a\">View </a>now\n", "View (https://example.com/a) now"},
	{"html link in a link keeps its address", "Subject: x\nContent-Type: text/html\n\n<a href=\"https://example.com/a\">Ack<a href=\"https://example.com/b\">Mute</a>\n", "Ack (https://example.com/a)Mute (https://example.com/b)"},
	{"html head ended by its text", "Subject: Alert\nContent-Type: text/html\n\n<head><meta name=x content=y> Disk full<br>on db1\n", "Disk full\non db1"},
}

// HZ-GB-2312's line continuation ("~" and CRLF) is read whatever the
// reads cut: here one byte each, so that every CR ends a read, and a lone
// CR (no line end) stays.
func TestHZContinuationAcrossReads(t *testing.T) {
	t.Parallel()
	r, err := charsetReader("HZ-GB-2312", iotest.OneByteReader(strings.NewReader("~{;aRi8D5=~}~\r\n~{OBNgH}5c!#~}\r\na\rb\r")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if want := "会议改到下午三点。\na\rb\r"; err != nil || string(got) != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}
