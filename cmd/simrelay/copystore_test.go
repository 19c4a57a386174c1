package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/postgres"
)

// runAdmin runs simrelay admin with args in this process and returns its
// exit code and output.
func runAdmin(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = admin(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// pgCompanies counts the companies of the database at url.
func pgCompanies(t *testing.T, url string) int {
	t.Helper()
	pg, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	ids, err := pg.CompanyIDs()
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

// openPG opens the database at url for the test, closed when it ends.
func openPG(t *testing.T, url string) *postgres.Store {
	t.Helper()
	pg, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	return pg
}

// A store started by admin create-company and given a plan is copied: the
// counts of both sides are printed and agree, and the company signs in on
// PostgreSQL with the same id. A second copy into that database is refused,
// saying why, and changes nothing.
func TestCopyStore(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	dir := t.TempDir()
	if code, _, errOut := runAdmin(t, "create-company", "--data-dir", dir, "--company", "Acme", "--email", "ana@acme.example", "--password", "Secret123"); code != 0 {
		t.Fatalf("create-company: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runAdmin(t, "set-plan", "--data-dir", dir, "--company", "1", "--plan", "pro"); code != 0 {
		t.Fatalf("set-plan: exit %d: %s", code, errOut)
	}
	url := pgtest.URL(t)
	code, out, errOut := runAdmin(t, "copy-store", "--data-dir", dir, "--to", url)
	if code != 0 {
		t.Fatalf("copy-store: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"KIND", "EMBEDDED", "POSTGRESQL", "companies  1  1", "users  1  1", "subscriptions  1  1", "Copied:  every  count  agrees."} {
		if !strings.Contains(squeeze(out), want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "differs") {
		t.Errorf("the counts differ:\n%s", out)
	}
	pg, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := pg.UserByEmail("ANA@acme.example")
	pg.Close()
	if err != nil || u.CompanyID != 1 || u.PasswordHash == "" {
		t.Errorf("the admin on PostgreSQL: %+v, %v", u, err)
	}

	code, _, errOut = runAdmin(t, "copy-store", "--data-dir", dir, "--to", url)
	if code != 1 || !strings.Contains(errOut, "already holds a company") || !strings.Contains(errOut, "nothing was copied") {
		t.Errorf("a second copy into the same database: exit %d: %s", code, errOut)
	}
	if n := pgCompanies(t, url); n != 1 {
		t.Errorf("%d companies after the refused copy, want 1", n)
	}
}

// squeeze collapses runs of blanks, so a report's columns read as "a  b  c".
func squeeze(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		b.WriteString(strings.Join(strings.Fields(line), "  "))
		b.WriteByte('\n')
	}
	return b.String()
}

// copy-store wants --to, and a --data-dir that holds a store; it never
// prints the URL's password.
func TestCopyStoreRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code, _, errOut := runAdmin(t, "copy-store", "--data-dir", dir); code != 2 || !strings.Contains(errOut, "--to") {
		t.Errorf("without --to: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runAdmin(t, "copy-store", "--data-dir", dir, "--to", "mysql://x"); code != 2 || !strings.Contains(errOut, "PostgreSQL URL") {
		t.Errorf("--to mysql://: exit %d: %s", code, errOut)
	}
	code, out, errOut := runAdmin(t, "copy-store", "--data-dir", dir, "--to", "postgres://ana:hunter2@127.0.0.1:1/db")
	if code != 1 || !strings.Contains(errOut, "no store there") {
		t.Errorf("an empty --data-dir: exit %d: %s", code, errOut)
	}
	if strings.Contains(out+errOut, "hunter2") {
		t.Errorf("the password is printed:\n%s%s", out, errOut)
	}
}

// The oldest store there is (schema version 1, testdata) is refused until
// migrated; migrated by today's code, it is copied whole and answers the
// same on PostgreSQL.
func TestCopyStoreV1(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join("..", "..", "store", "boltstore", "testdata", "v1", boltstore.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, boltstore.FileName), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	url := pgtest.URL(t)

	// Read-only, the old file is not migrated, and is refused as such.
	code, _, errOut := runAdmin(t, "copy-store", "--data-dir", dir, "--to", url)
	if code != 1 || !strings.Contains(errOut, "schema version 1") || !strings.Contains(errOut, "simrelay serve") {
		t.Errorf("an unmigrated store: exit %d: %s", code, errOut)
	}
	if n := pgCompanies(t, url); n != 0 {
		t.Errorf("%d companies after a refused copy, want 0", n)
	}

	st, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	code, out, errOut := runAdmin(t, "copy-store", "--data-dir", dir, "--to", url)
	if code != 0 || strings.Contains(out, "differs") {
		t.Fatalf("copy-store: exit %d\n%s%s", code, out, errOut)
	}
	sameAnswers(t, dir, url)
}

// asJSON is v as JSON, an empty list as null: the backends differ there,
// and no caller tells them apart.
func asJSON(v any) []byte {
	j, _ := json.Marshal(v)
	if string(j) == "[]" {
		return []byte("null")
	}
	return j
}

// copyReader is what sameAnswers asks of both stores.
type copyReader interface {
	CompanyIDs() ([]uint64, error)
	Company(companyID uint64) (store.Company, error)
	CompanyUsers(companyID uint64) ([]store.User, error)
	CompanyDevices(companyID uint64) ([]store.Device, error)
	DeviceFailures(companyID, deviceID uint64) ([]store.DeviceFailure, error)
	MessageByUUID(companyID uint64, uuid string) (store.Message, error)
	OptOuts(companyID uint64, after string, limit int) ([]store.OptOut, error)
	Pools(companyID uint64) ([]store.Pool, error)
	Conversations(companyID uint64, device string, limit int) ([]store.Conversation, error)
	WebhookSet(companyID uint64) (store.WebhookSet, error)
	WebhookOutboxSize(companyID uint64) (deliveries int, bytes int64, err error)
	DueWebhookDeliveries(now time.Time, limit int, skip store.DueSkip) ([]store.WebhookDue, time.Time, error)
	WebhookJob(deliveryID uint64) (store.WebhookJob, error)
	StatsTotals(companyID uint64) (store.Counts, error)
	StatsDevices(companyID uint64) ([]store.StatsDevice, error)
}

// sameAnswers fails t unless the copy in the database at url answers as
// the embedded store in dir does: every company, its users, devices, their
// failures and conversations, every message, opt-outs, pools, counters,
// webhooks and each pending delivery as an attempt would send it.
func sameAnswers(t *testing.T, dir, url string) {
	t.Helper()
	b, err := boltstore.Open(dir, boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pg := openPG(t, url)
	same := func(what string, read func(s copyReader) (any, error)) {
		t.Helper()
		want, werr := read(b)
		got, gerr := read(pg)
		jw, jg := asJSON(want), asJSON(got)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(jw, jg) {
			t.Errorf("%s:\nembedded   %s (%v)\npostgresql %s (%v)", what, jw, werr, jg, gerr)
		}
	}
	same("company ids", func(s copyReader) (any, error) { return s.CompanyIDs() })
	ids, err := b.CompanyIDs()
	if err != nil || len(ids) == 0 {
		t.Fatalf("company ids: %v, %v", ids, err)
	}
	messages := 0
	for _, cid := range ids {
		same(fmt.Sprintf("company %d", cid), func(s copyReader) (any, error) { return s.Company(cid) })
		same(fmt.Sprintf("users of company %d", cid), func(s copyReader) (any, error) { return s.CompanyUsers(cid) })
		same(fmt.Sprintf("devices of company %d", cid), func(s copyReader) (any, error) { return s.CompanyDevices(cid) })
		same(fmt.Sprintf("opt-outs of company %d", cid), func(s copyReader) (any, error) { return s.OptOuts(cid, "", 1000) })
		same(fmt.Sprintf("pools of company %d", cid), func(s copyReader) (any, error) { return s.Pools(cid) })
		same(fmt.Sprintf("webhook set of company %d", cid), func(s copyReader) (any, error) { return s.WebhookSet(cid) })
		same(fmt.Sprintf("webhook outbox of company %d", cid), func(s copyReader) (any, error) {
			n, size, err := s.WebhookOutboxSize(cid)
			return []any{n, size}, err
		})
		same(fmt.Sprintf("counters of company %d", cid), func(s copyReader) (any, error) { return s.StatsTotals(cid) })
		same(fmt.Sprintf("counted devices of company %d", cid), func(s copyReader) (any, error) { return s.StatsDevices(cid) })
		devs, _ := b.CompanyDevices(cid)
		for _, d := range devs {
			same("failures of device "+d.Fingerprint, func(s copyReader) (any, error) { return s.DeviceFailures(cid, d.ID) })
			same("conversations of device "+d.Fingerprint, func(s copyReader) (any, error) { return s.Conversations(cid, d.Fingerprint, 100) })
		}
		for after, done := uint64(0), false; !done; {
			var page []store.Message
			page, after, done, err = b.CompanyMessagesAfter(cid, after, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range page {
				messages++
				same("message "+m.UUID, func(s copyReader) (any, error) { return s.MessageByUUID(cid, m.UUID) })
			}
		}
	}
	if messages == 0 {
		t.Error("the store holds no message to compare")
	}
	far := time.Now().Add(24 * time.Hour)
	same("due deliveries", func(s copyReader) (any, error) {
		due, next, err := s.DueWebhookDeliveries(far, 1000, nil)
		return []any{due, next}, err
	})
	due, _, err := b.DueWebhookDeliveries(far, 1000, nil)
	if err != nil || len(due) == 0 {
		t.Errorf("the store holds no delivery to compare: %v", err)
	}
	for _, d := range due {
		same(fmt.Sprintf("delivery %d", d.ID), func(s copyReader) (any, error) { return s.WebhookJob(d.ID) })
	}
}

// TestBenchRefusesADatabaseWithACompany: the bench fills the database it is
// given, so one holding a company (production's, named by
// SIMRELAY_DATABASE_URL in the shell) is refused before anything is written
// to it or migrated (store/postgres, Options.Empty), saying so.
func TestBenchRefusesADatabaseWithACompany(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	url := pgtest.URL(t)
	if code, _, errOut := runAdmin(t, "create-company", "--database-url", url, "--company", "Acme", "--email", "ana@acme.example", "--password", "Secret123"); code != 0 {
		t.Fatalf("create-company: %d %s", code, errOut)
	}
	code, out, errOut := runCmd(t, "bench", "--database-url", url, "--phones", "2", "--messages", "10", "--json", "")
	if code != 1 || !strings.Contains(errOut, "the database holds a company already") || !strings.Contains(errOut, "nothing was written to it") {
		t.Fatalf("bench on a database with a company: %d %q %q", code, out, errOut)
	}
	if n := pgCompanies(t, url); n != 1 {
		t.Fatalf("%d companies after the refused bench, want 1", n)
	}
}

// copyFixture is an embedded store with one company, made by admin
// create-company, and an empty PostgreSQL database of its own.
func copyFixture(t *testing.T) (dir, url string) {
	t.Helper()
	dir = t.TempDir()
	if code, _, errOut := runAdmin(t, "create-company", "--data-dir", dir, "--company", "Acme", "--email", "ana@acme.example", "--password", "Secret123"); code != 0 {
		t.Fatalf("create-company: exit %d: %s", code, errOut)
	}
	return dir, pgtest.URL(t)
}

// A copy into a database on which a node runs is refused, naming it, and
// writes nothing: the node holds the database's secrets in memory, which
// the copy replaces with the embedded store's, so the keys it signs and
// seals with would no longer be the others'. Once the node has stopped,
// the copy goes through.
func TestCopyStoreRefusesALiveNode(t *testing.T) {
	t.Parallel()
	dir, url := copyFixture(t)
	pg := openPG(t, url)
	if err := pg.RegisterNode(postgres.Node{Name: "web1", Bus: true, Instance: "a"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	seal, err := pg.Secret("api-key-seal", 32)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAdmin(t, "copy-store", "--data-dir", dir, "--to", url)
	if code != 1 || !strings.Contains(errOut, "web1") || !strings.Contains(errOut, "stop every node") || !strings.Contains(errOut, "nothing was copied") {
		t.Errorf("a copy beside a live node: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if n := pgCompanies(t, url); n != 0 {
		t.Errorf("%d companies after the refused copy, want 0", n)
	}
	if again, err := pg.Secret("api-key-seal", 32); err != nil || !bytes.Equal(again, seal) {
		t.Errorf("the live node's seal key was replaced by the refused copy (%v)", err)
	}
	if err := pg.LeaveNode("web1", "a"); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runAdmin(t, "copy-store", "--data-dir", dir, "--to", url); code != 0 {
		t.Errorf("the copy once the node stopped: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// A database a cluster's node was started on (and stopped) without ever
// creating a company holds the secrets only a cluster makes (the bus's
// cluster id, the settings digest's key) beside those a server makes. The
// copy replaces them all with the embedded store's: its counts agree and
// it exits 0, and the next node makes the cluster's own afresh.
func TestCopyStoreOverAStoppedClusterNode(t *testing.T) {
	t.Parallel()
	dir, url := copyFixture(t)
	pg := openPG(t, url)
	for name, size := range map[string]int{"api-key-seal": 32, "bus-cluster-id": 8, "settings-digest": 32} {
		if _, err := pg.Secret(name, size); err != nil {
			t.Fatal(err)
		}
	}
	if err := pg.RegisterNode(postgres.Node{Name: "web1", Bus: true, Instance: "a"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := pg.LeaveNode("web1", "a"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAdmin(t, "copy-store", "--data-dir", dir, "--to", url)
	if code != 0 || !strings.Contains(out, "Copied: every count agrees.") {
		t.Fatalf("copy-store over a stopped cluster node: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	src, err := boltstore.Open(dir, boltstore.Options{}) // Secret writes a missing one: the store has this one
	if err != nil {
		t.Fatal(err)
	}
	want, err := src.Secret("api-key-seal", 32)
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pg.Secret("api-key-seal", 32); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the API keys' seal on PostgreSQL is not the embedded store's (%v)", err)
	}
}
