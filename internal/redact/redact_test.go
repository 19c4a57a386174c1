package redact

import "testing"

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		fn    func(string) string
		cases map[string]string
	}{
		{"URL", URL, map[string]string{
			"postgres://u:s3cret@db/x":                "postgres://u:xxxxx@db/x",
			"postgres://u:p@ss@db:5432/x?a=b":         "postgres://u:xxxxx@db:5432/x?a=b",
			"postgres://u@db/x":                       "postgres://u@db/x",
			"postgres:///x?host=/tmp&password=s3cret": "postgres:///x?host=/tmp&password=xxxxx",
			"postgres://db/x?PASSWORD=s3cret&a=b":     "postgres://db/x?PASSWORD=xxxxx&a=b",
			"not a url":                               "not a url",
			"postgres://u:p/ss@db/x":                  "postgres://u:xxxxx@db/x",
			"postgres://u:s3cret&password=x@db/x":     "postgres://u:xxxxx@db/x", // a parameter's form inside the password
			// A '?' or '#' in the password, unescaped, is no query.
			"postgres://u:pa?ss@db/x":         "postgres://u:xxxxx@db/x",
			"postgres://u:pa#ss@db/x?a=b":     "postgres://u:xxxxx@db/x?a=b",
			"postgres://u:p@a?b@db/x":         "postgres://u:xxxxx@db/x",
			"postgres://u:p@db/x?a=b@c":       "postgres://u:xxxxx@c", // too much, never too little
			"postgres://db/x?application=a@b": "postgres://db/x?application=a@b",
			"postgres://db/x?password=a@b":    "postgres://db/x?password=xxxxx",
			// A value refused as no URL is shown without what may be its
			// password: a URL missing its "://", or libpq's key=value string.
			"postgres//u:s3cret@db/x":          "xxxxx@db/x",
			"u:s3cret@db:5432/x":               "xxxxx@db:5432/x",
			"host=db user=u password=s3cret":   "host=db user=u password=xxxxx",
			"password=s3cret host=db dbname=x": "password=xxxxx host=db dbname=x",
			// A key as pgx reads it: percent-decoded, spaces trimmed; and
			// a value as pgx reads it: quoted, escaped, with '#' or (in
			// libpq's string) '&' in it, after spaces.
			"postgres://db/x?pass%77ord=s3cret&a=b":  "postgres://db/x?pass%77ord=xxxxx&a=b",
			"postgres://db/x?%70assword=s3cret":      "postgres://db/x?%70assword=xxxxx",
			"postgres://db/x?a=b& password =s3cret":  "postgres://db/x?a=b& password =xxxxx",
			"postgres://db/x?sslpassword=s3cret":     "postgres://db/x?sslpassword=xxxxx",
			"postgres://db/x?password=s3#cret&a=b":   "postgres://db/x?password=xxxxx&a=b",
			"host=db password = s3cret dbname=x":     "host=db password = xxxxx dbname=x",
			"host=db password='s3 cr\\'et' dbname=x": "host=db password=xxxxx dbname=x",
			"host=db password=s3\\ cret dbname=x":    "host=db password=xxxxx dbname=x",
			"host=db password=s3&cret dbname=x":      "host=db password=xxxxx dbname=x",
			"host='db'password=s3cret":               "host='db'password=xxxxx",
			// In a URL quotes and spaces are the value's own (pgx reads
			// the quotes, and the string it refuses for the space is
			// shown): only '&' ends it.
			"postgres://db/x?password=s3 cret&a=b":   "postgres://db/x?password=xxxxx&a=b",
			"postgres://db/x?password='s3'cr et&a=b": "postgres://db/x?password=xxxxx&a=b",
			"postgresql://db/x?password=s3\\ cret":   "postgresql://db/x?password=xxxxx",
		}},
		// Userinfo hides the user name too: in a NATS URL it may be the token.
		{"Userinfo", Userinfo, map[string]string{
			"nats://s3cret@bus:4222":     "nats://xxxxx@bus:4222",
			"nats://u:s3cret@bus:4222":   "nats://xxxxx@bus:4222",
			"tls://u:s3c@ret@bus:4222/x": "tls://xxxxx@bus:4222/x",
			"nats://bus:4222":            "nats://bus:4222",
			"nats://to?ken@bus:4222":     "nats://xxxxx@bus:4222",
			"nats//s3cret@bus:4222":      "xxxxx@bus:4222",
			"http://u:s3cret@bus:bad":    "http://xxxxx@bus:bad",
		}},
		// Link hides the user info and every query value and the fragment:
		// a signed media link carries its key there.
		{"Link", Link, map[string]string{
			"https://cdn.example.com/a/cat.png":                                    "https://cdn.example.com/a/cat.png",
			"https://u:s3cret@cdn.example.com/cat.png":                             "https://xxxxx@cdn.example.com/cat.png",
			"https://t0ken@cdn.example.com/cat.png":                                "https://xxxxx@cdn.example.com/cat.png",
			"https://b.s3.example/cat.png?X-Amz-Signature=s3cret&X-Amz-Expires=60": "https://b.s3.example/cat.png?X-Amz-Signature=xxxxx&X-Amz-Expires=xxxxx",
			"https://cdn.example.com/cat.png?s3cret&a=":                            "https://cdn.example.com/cat.png?xxxxx&a=xxxxx",
			"https://cdn.example.com/cat.png#access_token=s3cret":                  "https://cdn.example.com/cat.png#xxxxx",
			"https://cdn.example.com/cat.png?#":                                    "https://cdn.example.com/cat.png?#",
			"https://u:p/ss@cdn.example.com/cat.png?sig=s3cret":                    "https://xxxxx@cdn.example.com/cat.png?sig=xxxxx",
			// An '@' after the query starts: the user info's end is unknown.
			"https://u:pa?ss@cdn.example.com/cat.png":  "https://xxxxx",
			"https://cdn.example.com/c.png?to=a@b&k=s": "https://xxxxx",
			"http://u:s3cret@cdn.example.com/c?k=s":    "http://xxxxx@cdn.example.com/c?k=xxxxx",
			"cdn.example.com/c.png?k=s3cret":           "cdn.example.com/c.png?k=xxxxx",
			"//u:s3cret@cdn.example.com/c.png":         "xxxxx@cdn.example.com/c.png",
		}},
	} {
		for in, want := range tt.cases {
			if got := tt.fn(in); got != want {
				t.Errorf("%s(%q) = %q, want %q", tt.name, in, got, want)
			}
		}
	}
}
