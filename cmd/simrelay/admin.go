package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/durable"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/postgres"
)

const adminUsage = `Usage:
  simrelay admin create-company --company NAME --email E --password P [--first-name F] [--last-name L] [--data-dir D | --database-url URL]
  simrelay admin mail [--data-dir D | --database-url URL] [--json]
  simrelay admin backup FILE [--data-dir D]
  simrelay admin restore FILE [--data-dir D]
  simrelay admin check [--data-dir D]
  simrelay admin set-plan --company ID --plan ID [--plans FILE] [--data-dir D | --database-url URL]
  simrelay admin delete-device --company ID --device FINGERPRINT [--data-dir D | --database-url URL]
  simrelay admin delete-company --company ID --confirm NAME [--expired-checkout CS_ID] [--data-dir D | --database-url URL]
  simrelay admin copy-store --to postgres://... [--data-dir D]
  simrelay admin rotate-keys [--data-dir D | --database-url URL]

Admin commands work on the store directly. The embedded store (--data-dir)
is one process's at a time, so its server must be stopped; a running
server's store is refused within 2 seconds. Back up a running server with
GET /admin/backup instead. Only create-company and restore start a new
store; the others refuse a --data-dir that holds none, and a database
without simrelay's schema (create-company creates it). Ctrl-C stops a
command where it is, as a kill does: each of its writes is whole or
not made.

A store in PostgreSQL (--database-url, or SIMRELAY_DATABASE_URL) is shared:
the commands run beside its servers, each in its own transactions, but
rotate-keys, which wants every node stopped (the keys are read at a
start). Back it up with pg_dump: admin backup copies the embedded store
only.
`

func admin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, adminUsage)
		return 2
	}
	var err error
	switch args[0] {
	case "create-company":
		err = adminCreateCompany(ctx, args[1:], stdout, stderr)
	case "mail":
		err = adminMail(ctx, args[1:], stdout, stderr)
	case "backup":
		err = adminBackup(args[1:], stdout, stderr)
	case "restore":
		err = adminRestore(args[1:], stdout, stderr)
	case "check":
		err = adminCheck(args[1:], stdout, stderr)
	case "set-plan":
		err = adminSetPlan(ctx, args[1:], stdout, stderr)
	case "delete-device":
		err = adminDeleteDevice(ctx, args[1:], stdout, stderr)
	case "delete-company":
		err = adminDeleteCompany(ctx, args[1:], stdout, stderr)
	case "copy-store":
		err = adminCopyStore(ctx, args[1:], stdout, stderr)
	case "rotate-keys":
		err = adminRotateKeys(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, adminUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "simrelay admin: unknown command %q\n\n%s", args[0], adminUsage)
		return 2
	}
	var usageErr usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usageErr):
		fmt.Fprintf(stderr, "simrelay admin %s: %v\n", args[0], err)
		return 2
	}
	fmt.Fprintf(stderr, "simrelay admin %s: %v\n", args[0], err)
	return 1
}

type usageError struct{ error }

// adminFlags is the flag set of an admin command, with the flags that say
// where its store is; the command fills in the rest of the store's settings.
func adminFlags(name string, stderr io.Writer) (*flag.FlagSet, *storeConfig) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	sc := &storeConfig{}
	fs.StringVar(&sc.dataDir, "data-dir", defaultDataDir, "directory of the embedded store")
	sc.databaseURL = addDatabaseURL(fs)
	fs.Usage = flagUsage(fs, "Usage: simrelay admin "+name+" [flags]\n\n")
	return fs, sc
}

func adminCreateCompany(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, where := adminFlags("create-company", stderr)
	name := fs.String("company", "", "company name (required)")
	email := fs.String("email", "", "e-mail of the company's first admin (required)")
	password := fs.String("password", "", "the admin's password: 8 or more characters with an upper-case letter and a number (required)")
	firstName := fs.String("first-name", "", "the admin's first name (default: read in the e-mail address, ana.lima@... is Ana)")
	lastName := fs.String("last-name", "", "the admin's last name (default: read in the e-mail address, ana.lima@... is Lima)")
	fs.Usage = flagUsage(fs, "Usage: simrelay admin create-company --company NAME --email E --password P [--first-name F] [--last-name L] [--data-dir D | --database-url URL]\n\n")
	if err := parseFlags(fs, args, 0); err != nil {
		return usageOrHelp(err)
	}
	owner := account.OwnerInput{FirstName: *firstName, LastName: *lastName, Email: *email, Password: *password}
	// Bad input is refused before the store is opened: opening creates it
	// (the data file, or PostgreSQL's schema), which a refused command must
	// not leave behind.
	if _, _, err := account.CheckNewCompany(*name, owner); err != nil {
		return flagProblem(err)
	}
	st, err := openBackend(ctx, *where)
	if err != nil {
		return err
	}
	defer st.Close()
	now := backendClock(st)
	// Mail is never sent here (the admin is created verified), but the service wants a mailer.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mailer, err := mail.New(mail.Config{}, st, quiet, now)
	if err != nil {
		return err
	}
	var c store.Company
	var u store.User
	var key string
	// The company's API key is sealed under the seal key account.New
	// reads: on PostgreSQL, where a rotate-keys may run beside this
	// command, both are done under the rotation's lock, so that the key is
	// sealed and stored before the rotation (which re-seals it) or after
	// it (under the new key), never under a key the rotation replaced. The
	// embedded store's file lock keeps the two commands apart already.
	err = holdSecrets(st, func() error {
		accounts, err := account.New(account.Config{}, st, mailer, quiet, now)
		if err != nil {
			return err
		}
		c, u, key, err = accounts.CreateCompany(*name, owner)
		if err != nil {
			return flagProblem(err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]any{"companyId": c.ID, "userId": u.ID, "apiKey": key})
}

// holdSecrets runs fn, which reads the server's keys from st and writes
// with them, so that a rotate-keys does not run across it: on PostgreSQL
// under the rotation's lock (postgres.Store.HoldSecrets); the embedded
// store is held by this command alone (its file lock) while it is open.
func holdSecrets(st backend, fn func() error) error {
	if pg, ok := st.(*postgres.Store); ok {
		return pg.HoldSecrets(fn)
	}
	return fn()
}

// flagProblem is err as create-company says it: a refusal of the input
// (problem.Error) is a usage error naming its flag; anything else as it is.
func flagProblem(err error) error {
	if pe, ok := problem.As(err); ok {
		if pe.Field != "" {
			return usageError{errors.New(pe.Refield("--" + pe.Field).Message)}
		}
		return usageError{errors.New(pe.Message)}
	}
	return err
}

func usageOrHelp(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err}
}

// parseFileFlags parses the flags of a command that takes one FILE, which
// may come before or after them (admin backup, admin restore). It returns
// the FILE, or "" when none was named: the caller says what is missing, after
// what it refuses first.
func parseFileFlags(fs *flag.FlagSet, args []string) (string, error) {
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args, 1); err != nil {
		return "", usageOrHelp(err)
	}
	if fs.NArg() == 1 {
		if file != "" {
			return "", usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
		}
		file = fs.Arg(0)
	}
	return file, nil
}

func adminMail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, where := adminFlags("mail", stderr)
	asJSON := fs.Bool("json", false, "print the outbox as JSON lines")
	if err := parseFlags(fs, args, 0); err != nil {
		return usageOrHelp(err)
	}
	where.existing, where.readOnly = true, true
	st, err := openBackend(ctx, *where)
	if errors.Is(err, boltstore.ErrLocked) {
		return fmt.Errorf("%w; a running server writes each mail to its log as well (no --smtp-url)", err)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	mails, err := st.Mails(false)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, m := range mails {
			if err := enc.Encode(m); err != nil {
				return err
			}
		}
		return nil
	}
	if len(mails) == 0 {
		fmt.Fprintln(stdout, "The mail outbox is empty.")
		return nil
	}
	for _, m := range mails {
		tw := tabwriter.NewWriter(stdout, 0, 0, 1, ' ', 0)
		fmt.Fprintf(tw, "Mail\t#%d\nState\t%s\nDate\t%s\nTo\t%s\nSubject\t%s\n", m.ID, m.State, m.CreatedAt.UTC().Format(time.RFC3339), m.To, m.Subject)
		if m.LastError != "" {
			fmt.Fprintf(tw, "Error\t%s\n", m.LastError)
		}
		_ = tw.Flush()
		if m.Text != "" {
			fmt.Fprintf(stdout, "\n%s\n", m.Text)
		}
		fmt.Fprintln(stdout, "----")
	}
	return nil
}

func adminBackup(args []string, stdout, stderr io.Writer) error {
	fs, where := adminFlags("backup", stderr)
	fs.Usage = flagUsage(fs, "Usage: simrelay admin backup FILE [--data-dir D]\n\n")
	file, err := parseFileFlags(fs, args)
	if err != nil {
		return err
	}
	if where.postgres() {
		// As GET /admin/backup answers 409 backup_external there.
		return usageError{fmt.Errorf("the store is in the PostgreSQL database %s: back it up with pg_dump (docs/operations.md); admin backup copies the embedded store of --data-dir only", where.databaseURL)}
	}
	if file == "" {
		return usageError{errors.New("name the FILE to write")}
	}
	// FILE is checked before the copy is made, which would then fail its
	// rename (a directory) or its creation (a directory not there), naming
	// the temporary copy rather than FILE. Both are what the disk holds,
	// not the command line: exit 1, as a file given as --data-dir.
	if fi, err := os.Stat(file); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory: name the file to write, such as %s; nothing was written", file, filepath.Join(file, "simrelay-backup.db"))
	}
	// Nor a device, a FIFO or a socket (a link is a name, which the rename
	// replaces): the rename would put the copy in its place, /dev/null
	// become a plain file.
	if fi, err := os.Lstat(file); err == nil && !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
		return fmt.Errorf("%s is not a regular file: name a file to write; nothing was written", file)
	}
	fileDir, err := os.Stat(filepath.Dir(file))
	if err != nil {
		return fmt.Errorf("the directory of %s: %w; nothing was written", file, err)
	} else if !fileDir.IsDir() {
		return fmt.Errorf("the directory of %s: %s is not a directory; nothing was written", file, filepath.Dir(file))
	}
	// The store's own name in the data dir (through any path to it): the
	// copy's rename would put it in place of the store, and no backup
	// would be left beside it. A hard link to the store elsewhere is only
	// a name, which the rename replaces, leaving the store alone.
	if dd, err := os.Stat(where.dataDir); err == nil && os.SameFile(dd, fileDir) && filepath.Base(file) == boltstore.FileName {
		return fmt.Errorf("%s is the store of --data-dir %s itself: name another file; nothing was written", file, where.dataDir)
	}
	st, err := openStore(where.dataDir, boltstore.Options{ReadOnly: true})
	if errors.Is(err, boltstore.ErrLocked) {
		return fmt.Errorf("%w; or fetch a copy from the running server: GET /admin/backup with its --admin-token", err)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	n, err := writeFileAtomic(file, func(w io.Writer) (int64, error) { return st.Backup(w) })
	if err != nil {
		return fmt.Errorf("write the backup %s: %w", file, err)
	}
	fmt.Fprintf(stdout, "wrote %d bytes to %s\n", n, file)
	return nil
}

// backupPattern names a backup's copy beside its FILE until its rename.
const backupPattern = ".simrelay-backup-*"

// writeFileAtomic writes through a temporary file in the same directory, syncs
// it and renames it into place, so FILE is either the old one or a whole copy,
// and the rename is durable once it returns. The copies that backups killed
// before their rename left in the directory go first; a copy is held
// (holdCopy) until it is renamed, so one that another backup into the
// directory is writing stays.
//
// Its errors say whether FILE was written ("nothing was written" until the
// rename), and name the directory or the cause, not the temporary copy: the
// operator named FILE, never that copy, which is removed.
func writeFileAtomic(path string, write func(io.Writer) (int64, error)) (int64, error) {
	dir := filepath.Dir(path)
	removeKilledCopies(dir, backupPattern)
	tmp, err := os.CreateTemp(dir, backupPattern)
	if err != nil {
		return 0, fmt.Errorf("cannot create a file in %s: %w; nothing was written", dir, withoutPath(err))
	}
	defer os.Remove(tmp.Name())
	// Another backup into the directory meanwhile leaves this copy alone.
	release, err := holdCopy(tmp.Name())
	if err != nil {
		tmp.Close()
		return 0, fmt.Errorf("%w; nothing was written", withoutPath(err))
	}
	defer release()
	n, err := write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return n, fmt.Errorf("%w; nothing was written", withoutPath(err))
	}
	if err := durable.SyncDir(dir); err != nil {
		return n, fmt.Errorf("written, but its directory was not synced (a power loss may lose the file): %w", err)
	}
	return n, nil
}

// withoutPath is err without the path of an *fs.PathError or
// *os.LinkError at its top (the temporary copy's name).
func withoutPath(err error) error {
	switch e := err.(type) {
	case *os.PathError:
		return e.Err
	case *os.LinkError:
		return e.Err
	}
	return err
}
