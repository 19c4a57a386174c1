//go:build unix

package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// prepareShop is a template with a foreign key, a sequence and a row of
// its own, as a schema's migrations leave one.
func prepareShop(url string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE TABLE meta (k text PRIMARY KEY, v text);
		INSERT INTO meta VALUES ('version', '1');
		CREATE TABLE shops (id bigserial PRIMARY KEY, name text);
		CREATE TABLE orders (id bigserial PRIMARY KEY, shop bigint NOT NULL REFERENCES shops (id), item text);
		CREATE SEQUENCE numbers START 100`)
	return err
}

// use runs fn in a subtest on a database of template key, and answers the
// database's name once the subtest (and its cleanup) is over.
func use(t *testing.T, key string, fn func(t *testing.T, conn *pgx.Conn)) string {
	t.Helper()
	var name string
	t.Run(key, func(t *testing.T) {
		conn := connect(t, URLFrom(t, key, prepareShop))
		if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		fn(t, conn)
	})
	return name
}

func run(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
}

func exists(t *testing.T, name string) bool {
	t.Helper()
	var ok bool
	if err := admin.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// A copy a test is done with goes to the next test of its template as the
// template was: the rows the test wrote gone (whatever their foreign keys),
// the template's own rows kept, every sequence where the template left it.
func TestCopiesAreReusedAsNew(t *testing.T) {
	t.Parallel()
	const key = "reuse-as-new"
	first := use(t, key, func(t *testing.T, conn *pgx.Conn) {
		run(t, conn, `INSERT INTO shops (name) VALUES ('a'), ('b');
			INSERT INTO orders (shop, item) SELECT id, 'x' FROM shops;
			SELECT nextval('numbers'), nextval('numbers')`)
	})
	second := use(t, key, func(t *testing.T, conn *pgx.Conn) {
		ctx := context.Background()
		var shops, orders, meta int
		if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM shops), (SELECT count(*) FROM orders), (SELECT count(*) FROM meta WHERE v = '1')").
			Scan(&shops, &orders, &meta); err != nil {
			t.Fatal(err)
		}
		if shops != 0 || orders != 0 || meta != 1 {
			t.Errorf("the reused copy has %d shops, %d orders and %d of the template's rows; want 0, 0 and 1", shops, orders, meta)
		}
		var shop, number int64
		if err := conn.QueryRow(ctx, "INSERT INTO shops (name) VALUES ('c') RETURNING id").Scan(&shop); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT nextval('numbers')").Scan(&number); err != nil {
			t.Fatal(err)
		}
		if shop != 1 || number != 100 {
			t.Errorf("the reused copy's sequences give %d and %d; want 1 and 100, as a new copy", shop, number)
		}
	})
	if second != first {
		t.Fatalf("the second test got %s, the first %s: the copy was not reused", second, first)
	}
}

// A copy that cannot be made new again is dropped, never reused: its schema
// changed, the template's rows changed, a session stayed open in it, or it
// holds too many rows.
func TestCopiesThatChangedAreDropped(t *testing.T) {
	t.Parallel()
	// The session left open stays reachable until the test ends: a
	// connection nothing refers to may be collected, its socket closed by
	// the runtime's finalizer, and the copy then found without a session.
	var leaked []*pgx.Conn
	t.Cleanup(func() {
		for _, c := range leaked {
			c.Close(context.Background())
		}
	})
	for _, c := range []struct{ name, sql string }{
		{"schema", "ALTER TABLE orders ADD COLUMN note text"},
		{"new table", "CREATE TABLE extra (id int)"},
		{"table dropped and made again", "DROP TABLE orders; CREATE TABLE orders (id bigserial PRIMARY KEY, shop bigint NOT NULL REFERENCES shops (id), item text)"},
		{"constraint dropped", "ALTER TABLE orders DROP CONSTRAINT orders_shop_fkey"},
		{"sequence dropped", "DROP SEQUENCE numbers"},
		{"function", "CREATE FUNCTION one() RETURNS int LANGUAGE sql AS 'SELECT 1'"},
		{"index", "CREATE INDEX ON orders (item)"},
		{"setting", "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET work_mem = ''8MB''', current_database()); END $$"},
		{"template rows", "UPDATE meta SET v = '2'"},
		{"too many rows", "INSERT INTO shops (name) SELECT 'n' FROM generate_series(1, 20001)"},
		{"session left open", ""},
	} {
		key := "dropped-" + c.name
		first := use(t, key, func(t *testing.T, conn *pgx.Conn) {
			if c.sql != "" {
				run(t, conn, c.sql)
				return
			}
			var url string
			if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&url); err != nil {
				t.Fatal(err)
			}
			open, err := pgx.Connect(context.Background(), shared.url(url)) // left open on purpose
			if err != nil {
				t.Fatal(err)
			}
			leaked = append(leaked, open)
		})
		if exists(t, first) {
			t.Errorf("%s: the copy %s still exists after its test ended", c.name, first)
		}
		second := use(t, key, func(t *testing.T, conn *pgx.Conn) {
			var cols int
			if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders'").Scan(&cols); err != nil {
				t.Fatal(err)
			}
			if cols != 3 {
				t.Errorf("%s: the next copy's orders table has %d columns; want the template's 3", c.name, cols)
			}
		})
		if second == first {
			t.Errorf("%s: the copy %s was reused", c.name, first)
		}
	}
}
