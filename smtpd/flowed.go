package smtpd

import "strings"

// unflow undoes format=flowed (RFC 3676), the plain text of Thunderbird and
// Apple Mail: they wrap a paragraph at about 72 columns and end each line
// but its last with a space, the "soft" break a reader joins again. Read as
// fixed lines, a text written as one sentence would leave as an SMS broken
// mid-sentence every 72 characters.
//
// A line beginning with a space was space-stuffed (one space added by the
// sender) and loses it. A line ending in a space goes on in the next line;
// with delsp=yes that space was added for the wrap and goes too. The
// signature separator "-- " is a fixed line. Quoted lines (">") are left as
// they are, and end a paragraph: the reader drops them anyway.
func unflow(text string, delsp bool) string {
	var out []string
	var para strings.Builder
	open := false // para holds a paragraph whose last line was soft
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, ">") {
			if open {
				out, open = append(out, para.String()), false
				para.Reset()
			}
			out = append(out, line)
			continue
		}
		line = strings.TrimPrefix(line, " ")
		if line == "-- " && open {
			// The signature separator starts a line of its own, even after
			// a soft break (RFC 3676 section 4.3).
			out, open = append(out, para.String()), false
			para.Reset()
		}
		if line != "-- " && strings.HasSuffix(line, " ") {
			if delsp {
				line = line[:len(line)-1]
			}
			para.WriteString(line)
			open = true
			continue
		}
		para.WriteString(line)
		out, open = append(out, para.String()), false
		para.Reset()
	}
	if open {
		out = append(out, para.String())
	}
	return strings.Join(out, "\n")
}
