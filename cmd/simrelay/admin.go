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
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store/boltstore"
)

const adminUsage = `Usage:
  simrelay admin create-company --company NAME --email E --password P [--first-name F] [--last-name L] [--data-dir D]
  simrelay admin mail [--data-dir D] [--json]
  simrelay admin backup FILE [--data-dir D]
  simrelay admin set-plan --company ID --plan ID [--plans FILE] [--data-dir D]
  simrelay admin copy-store --to postgres://... [--data-dir D]

Admin commands work on the store directly, so the server must be stopped; a
running server's store is refused within 2 seconds. Back up a running server
with GET /admin/backup instead. Only create-company starts a new store; the
others refuse a --data-dir that holds none.
`

func admin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, adminUsage)
		return 2
	}
	var err error
	switch args[0] {
	case "create-company":
		err = adminCreateCompany(args[1:], stdout, stderr)
	case "mail":
		err = adminMail(args[1:], stdout, stderr)
	case "backup":
		err = adminBackup(args[1:], stdout, stderr)
	case "set-plan":
		err = adminSetPlan(args[1:], stdout, stderr)
	case "copy-store":
		err = adminCopyStore(ctx, args[1:], stdout, stderr)
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

func adminFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", defaultDataDir, "directory of the embedded store")
	addDatabaseURL(fs)
	fs.Usage = flagUsage(fs, "Usage: simrelay admin "+name+" [flags]\n\n")
	return fs, dir
}

func adminCreateCompany(args []string, stdout, stderr io.Writer) error {
	fs, dir := adminFlags("create-company", stderr)
	name := fs.String("company", "", "company name (required)")
	email := fs.String("email", "", "e-mail of the company's first admin (required)")
	password := fs.String("password", "", "the admin's password: 8 or more characters with an upper-case letter and a number (required)")
	firstName := fs.String("first-name", "", "the admin's first name (default: read in the e-mail address, ana.lima@... is Ana)")
	lastName := fs.String("last-name", "", "the admin's last name (default: read in the e-mail address, ana.lima@... is Lima)")
	fs.Usage = flagUsage(fs, "Usage: simrelay admin create-company --company NAME --email E --password P [--first-name F] [--last-name L] [--data-dir D]\n\n")
	if err := parseAdminFlags(fs, args, 0); err != nil {
		return usageOrHelp(err)
	}
	st, err := boltstore.Open(*dir, boltstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	// Mail is never sent here (the admin is created verified), but the service wants a mailer.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mailer, err := mail.New(mail.Config{}, st, quiet, time.Now)
	if err != nil {
		return err
	}
	accounts, err := account.New(account.Config{}, st, mailer, quiet, time.Now)
	if err != nil {
		return err
	}
	c, u, key, err := accounts.CreateCompany(*name, account.OwnerInput{FirstName: *firstName, LastName: *lastName, Email: *email, Password: *password})
	if pe, ok := problem.As(err); ok {
		if pe.Field != "" {
			return usageError{fmt.Errorf("--%s: %s", pe.Field, pe.Message)}
		}
		return usageError{errors.New(pe.Message)}
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]any{"companyId": c.ID, "userId": u.ID, "apiKey": key})
}

// openStore opens the store an admin command other than create-company
// works on. Those refuse a data dir without a store, so a mistyped
// --data-dir is said as such and nothing is created there, where
// boltstore.Open would start a new, empty store.
func openStore(dir string, opt boltstore.Options) (*boltstore.Store, error) {
	path := filepath.Join(dir, boltstore.FileName)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%s %q: no store there (no %s): give the server's data dir; simrelay serve and admin create-company start a new store", both("data-dir"), dir, boltstore.FileName)
	case err == nil && fi.Size() == 0:
		return nil, fmt.Errorf("%s %q: no store there yet (%s is empty, as a first start that failed leaves it); simrelay serve and admin create-company write a new store into it", both("data-dir"), dir, boltstore.FileName)
	}
	return boltstore.Open(dir, opt)
}

// parseAdminFlags is parseFlags for the admin commands, which refuse
// --database-url until the PostgreSQL store exists.
func parseAdminFlags(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := parseFlags(fs, args, maxArgs); err != nil {
		return err
	}
	if err := refuseDatabaseURL(fs); err != nil {
		return usageError{err}
	}
	return nil
}

func usageOrHelp(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err}
}

func adminMail(args []string, stdout, stderr io.Writer) error {
	fs, dir := adminFlags("mail", stderr)
	asJSON := fs.Bool("json", false, "print the outbox as JSON lines")
	if err := parseAdminFlags(fs, args, 0); err != nil {
		return usageOrHelp(err)
	}
	st, err := openStore(*dir, boltstore.Options{ReadOnly: true})
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
	fs, dir := adminFlags("backup", stderr)
	fs.Usage = flagUsage(fs, "Usage: simrelay admin backup FILE [--data-dir D]\n\n")
	// FILE may come before or after the flags.
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := parseAdminFlags(fs, args, 1); err != nil {
		return usageOrHelp(err)
	}
	if fs.NArg() == 1 {
		if file != "" {
			return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
		}
		file = fs.Arg(0)
	}
	if file == "" {
		return usageError{errors.New("name the FILE to write")}
	}
	st, err := openStore(*dir, boltstore.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer st.Close()
	n, err := writeFileAtomic(file, func(w io.Writer) (int64, error) { return st.Backup(w) })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d bytes to %s\n", n, file)
	return nil
}

// writeFileAtomic writes through a temporary file in the same directory, syncs
// it and renames it into place, so FILE is either the old one or a whole copy.
func writeFileAtomic(path string, write func(io.Writer) (int64, error)) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".simrelay-backup-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
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
	return n, err
}
