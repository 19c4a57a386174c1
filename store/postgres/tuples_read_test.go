package postgres

// tuplesRead runs fn in tx and returns how many rows and index entries of
// table it read: the table's by sequential scans and those of every index
// on it. The counts are the backend's not yet reported, which may hold
// earlier transactions': fn's are the difference over it.
func tuplesRead(tx *txn, table string, fn func() error) (int64, error) {
	var before, after int64
	count := func(n *int64) error {
		return tx.row(`SELECT pg_stat_get_xact_tuples_returned($1::regclass)
			+ (SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0) FROM pg_index
				WHERE indrelid = $1::regclass)`, table).Scan(n)
	}
	if err := count(&before); err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		return 0, err
	}
	if err := count(&after); err != nil {
		return 0, err
	}
	return after - before, nil
}
