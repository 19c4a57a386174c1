package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/internal/testhttp"
)

// When PostgreSQL answers a write that its disk is full (SQLSTATE 53100,
// raised here by the server itself from a trigger, as a table that cannot
// grow its file raises it), the API answers what it answers for the
// embedded store's full disk: 503 unavailable saying the disk is full,
// with Retry-After, nothing of the database's words in the body; reads go
// on, and /readyz stays ready (the database answers; its disk is not this
// node's). It answered a 500 internal before. The node logs the refusals
// at ERROR, naming the full disk, at most once per 10 s of its clock with
// the count left out since the line before: PostgreSQL's store logs
// nothing of its own, so the log said nothing before.
func TestPostgresDiskFullAnswers503(t *testing.T) {
	t.Parallel()
	n := newOutageNode(t)
	conn, err := pgx.Connect(context.Background(), n.relay.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(context.Background(), `
CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'could not extend file "base/1/2": No space left on device' USING ERRCODE = 'disk_full';
END $$;
CREATE TRIGGER disk_full BEFORE UPDATE ON companies FOR EACH ROW EXECUTE FUNCTION disk_full();`); err != nil {
		t.Fatal(err)
	}
	write := func(i int) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPatch, n.url+"/company", strings.NewReader(`{"name":"Renamed"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+n.key)
		req.Header.Set("Content-Type", "application/json")
		res, err := testhttp.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		b := string(body)
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(b, `"error":"unavailable"`) || !strings.Contains(b, "disk is full") || !strings.Contains(b, "nothing was done") {
			t.Fatalf("write %d on the database's full disk: %d %s, want 503 unavailable saying the disk is full", i, res.StatusCode, b)
		}
		if got := res.Header.Get("Retry-After"); got != "5" {
			t.Fatalf("Retry-After %q, want 5", got)
		}
		if strings.Contains(b, "No space left") || strings.Contains(b, "53100") || strings.Contains(b, "base/1/2") {
			t.Fatalf("the 503 shows the database's internals: %s", b)
		}
	}
	for i := range 3 {
		write(i)
	}
	lines := n.lines("store disk full: writes refused")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "disk is full") || !strings.Contains(lines[0], "No space left on device") {
		t.Fatalf("after 3 writes refused within 10 s the log has %d lines of them, want one ERROR naming the full disk and the database's error:\n%s", len(lines), n.logs.String())
	}
	if lines := n.lines("store unavailable"); len(lines) != 0 {
		t.Fatalf("a full disk logged as a database out of reach:\n%s", strings.Join(lines, "\n"))
	}
	n.clock.Advance(10 * time.Second)
	write(3)
	if lines = n.lines("store disk full: writes refused"); len(lines) != 2 || !strings.Contains(lines[1], "suppressed=2") {
		t.Fatalf("10 s after the first line the log has %d lines of refused writes, want a second saying suppressed=2:\n%s", len(lines), n.logs.String())
	}
	if status, _ := n.get(t, "/company"); status != http.StatusOK {
		t.Fatalf("a read on the database's full disk: %d, want 200", status)
	}
	if status, _ := n.get(t, "/readyz"); status != http.StatusOK {
		t.Fatalf("/readyz on the database's full disk: %d, want 200 (the database answers)", status)
	}
}
