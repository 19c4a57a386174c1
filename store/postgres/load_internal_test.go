package postgres

import (
	"context"
	"testing"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/store"
)

// Every table of the schema is either loaded, with a kind's records, or
// derived; every kind Load takes has a table, and a count.
func TestEveryTableLoaded(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.URL(t))
	rows, err := s.pool.Query(context.Background(), "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[store.Kind]bool{}
	tables := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables[name] = true
		k, ok := tableKinds[name]
		if !ok {
			t.Errorf("table %s: no kind, nor said to be derived (tableKinds in load.go)", name)
		}
		kinds[k] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for name := range tableKinds {
		if !tables[name] {
			t.Errorf("tableKinds names %s, which the schema has not", name)
		}
	}
	for _, k := range s.LoadKinds() {
		// Agent messages are rows of messages too.
		if !kinds[k] && !(k == store.KindAgentMessages && kinds[store.KindMessages]) {
			t.Errorf("kind %q is loaded into no table", k)
		}
		if _, ok := copyCounts[k]; !ok {
			t.Errorf("kind %q has no count", k)
		}
	}
}
