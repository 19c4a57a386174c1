package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/simrelay/simrelay/internal/cliflag"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/postgres"
)

const copyStoreUsage = "Usage: simrelay admin copy-store --to postgres://USER:PASSWORD@HOST:5432/DB [--data-dir D]\n\n" +
	"Copies the embedded store in --data-dir (its server stopped) into an empty PostgreSQL\n" +
	"database, in one transaction, keeping every id; then prints how many records of each\n" +
	"kind both sides hold, and fails when they differ. A database that holds a company is\n" +
	"refused, and so is one a node runs on (stop every node first) and a store holding a\n" +
	"kind of record this build cannot copy.\n\n"

// adminCopyStore is simrelay admin copy-store (contract section 12).
func adminCopyStore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("copy-store", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", defaultDataDir, "directory of the embedded store to copy; its server must be stopped")
	to := new(cliflag.DatabaseURL)
	fs.Var(to, "to", "the PostgreSQL database to copy into, postgres://USER:PASSWORD@HOST:5432/DB (libpq's URL); it must hold no company (required)")
	fs.Usage = flagUsage(fs, copyStoreUsage)
	// Every other admin command names its database --database-url.
	if namesDatabaseURL(args) {
		return usageError{errors.New("copy-store names the database it copies into with --to, not --database-url (--data-dir is the embedded store it copies from): simrelay admin copy-store --data-dir D --to postgres://USER:PASSWORD@HOST:5432/DB")}
	}
	if err := parseFlags(fs, args, 0); err != nil {
		return usageOrHelp(err)
	}
	if to.URL() == "" {
		return usageError{errors.New("--to: name the PostgreSQL database to copy into")}
	}
	src, err := openStore(*dir, boltstore.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer src.Close()
	before, err := src.CopyCounts()
	if err != nil {
		return err
	}
	// Empty: a database holding a company, or another application's
	// tables, is refused before anything is written, its schema left as
	// it was (Load checks again, inside its transaction).
	dst, err := postgres.Open(ctx, to.URL(), postgres.Options{Empty: true})
	if errors.Is(err, store.ErrNotEmpty) {
		return fmt.Errorf("%s already holds a company, so nothing was copied and its schema was left as it was: copy into a new, empty database (CREATE DATABASE)", to)
	}
	if errors.Is(err, postgres.ErrNoSchema) {
		return fmt.Errorf("%s: %w; nothing was copied: copy into a new, empty database (CREATE DATABASE)", to, err)
	}
	if err != nil {
		return err
	}
	defer dst.Close()
	if missing := store.Uncopied(before, src, dst); len(missing) > 0 {
		return fmt.Errorf("the store holds %s, which this build of simrelay cannot copy to PostgreSQL yet: nothing was copied", store.KindList(missing))
	}
	var total int64
	for _, n := range before {
		total += n
	}
	fmt.Fprintf(stdout, "Copying %s (%d records) into %s, in one transaction...\n\n", src.Path(), total, to)
	if err := dst.Load(src.Dump); err != nil {
		if errors.Is(err, store.ErrNotEmpty) {
			return fmt.Errorf("%s already holds a company, so nothing was copied: copy into a new, empty database (CREATE DATABASE)", to)
		}
		return fmt.Errorf("nothing was copied: %w", err)
	}
	after, err := dst.CopyCounts()
	if err != nil {
		return fmt.Errorf("the copy is committed, but counting it failed: %w", err)
	}
	differ := printCopyCounts(stdout, before, after, dst.LoadKinds())
	if len(differ) > 0 {
		return fmt.Errorf("the copy is committed, but the counts of %s differ: do not start a server on %s before finding out why", store.KindList(differ), to)
	}
	fmt.Fprintln(stdout, "\nCopied: every count agrees.")
	return nil
}

// printCopyCounts prints each kind's count on both sides (those the
// destination does not take, and the source holds none of, left out) and
// returns the kinds whose counts differ.
func printCopyCounts(w io.Writer, src, dst map[store.Kind]int64, loaded []store.Kind) []store.Kind {
	var kinds []store.Kind
	width := len("KIND")
	for _, k := range store.Kinds {
		if slices.Contains(loaded, k) || src[k] != 0 {
			kinds = append(kinds, k)
			width = max(width, len(k))
		}
	}
	fmt.Fprintf(w, "%-*s  %10s  %10s\n", width, "KIND", "EMBEDDED", "POSTGRESQL")
	var differ []store.Kind
	for _, k := range kinds {
		mark := ""
		if src[k] != dst[k] {
			differ, mark = append(differ, k), "  <- differs"
		}
		fmt.Fprintf(w, "%-*s  %10d  %10d%s\n", width, k, src[k], dst[k], mark)
	}
	return differ
}

// namesDatabaseURL reports whether args give a --database-url flag (in any
// of the flag package's spellings) before a "--".
func namesDatabaseURL(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "database-url" {
			return true
		}
	}
	return false
}
