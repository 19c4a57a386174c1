//go:build unix

package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// initdbArgs are initdb's settings after -D.
var initdbArgs = []string{"-U", superuser, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"}

// initData makes the cluster's data directory. initdb runs once for all
// the test binaries of a machine (make test starts a cluster in each of
// some 25 of them): its result is kept in base, named by what it depends
// on (initDataKey), and each cluster starts from a copy, a tenth of a
// second in /dev/shm against initdb's 1 to 1.5 s of the binary's start.
// The copy is made before the server first runs on the directory, so
// every cluster starts as new.
func initData(ctx context.Context, bin, base, dir, data string, cred *syscall.Credential) error {
	key, err := initDataKey(bin, cred)
	if err != nil {
		return err
	}
	kept := filepath.Join(base, dirPrefix+"initdb-"+key)
	if _, err := os.Stat(filepath.Join(kept, "PG_VERSION")); err == nil && ownKept(kept, cred) {
		if err := copyTree(kept, data, cred); err == nil {
			return nil
		}
		// A copy that failed midway (the kept one removed meanwhile, say)
		// leaves the directory to initdb.
		if err := os.RemoveAll(data); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), append([]string{"-D", data}, initdbArgs...)...)
	initdb.Dir, initdb.Env, initdb.SysProcAttr = dir, childEnv(), procAttr(cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %v%s\n%s", err, reachHint(cred, dir), out)
	}
	// Kept for the next binaries: copied under a name the sweep removes
	// once this binary is gone (a copy cut short by its death), then
	// renamed, which makes it whole in one step; another binary's rename
	// may come first, and this copy goes.
	tmp := filepath.Join(base, dirPrefix+strconv.Itoa(os.Getpid())+"-initdb")
	if err := copyTree(data, tmp, cred); err != nil || os.Rename(tmp, kept) != nil {
		_ = os.RemoveAll(tmp)
		return nil
	}
	removeOtherKept(base, kept, cred)
	return nil
}

// removeOtherKept removes the initdb results kept for other binaries (an
// older PostgreSQL) by the user that owns kept (cred's, ours when nil): a
// binary copying one meanwhile runs initdb instead. Those of other users
// stay, as root's tests would otherwise remove every user's from the
// shared directory.
func removeOtherKept(base, kept string, cred *syscall.Credential) {
	uid := uint32(os.Geteuid())
	if cred != nil {
		uid = cred.Uid
	}
	others, _ := filepath.Glob(filepath.Join(base, dirPrefix+"initdb-*"))
	for _, o := range others {
		if o == kept {
			continue
		}
		fi, err := os.Lstat(o)
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == uid {
			_ = os.RemoveAll(o)
		}
	}
}

// ownKept says whether the kept initdb result may be copied: a directory,
// not a link to one, of the user the cluster runs as (cred's, ours when
// nil), that no other user may write to, as copyTree leaves the one it
// keeps (the data directory's 0700). base is a directory every user writes
// to and the name is anyone's to compute: one another user made, or one
// others may change, could carry a configuration (a library to load, an
// archive command) that the server would run as the tests' user; initdb
// makes the cluster's directory instead, and that other directory stays,
// the kept name taken, until its owner removes it.
func ownKept(kept string, cred *syscall.Credential) bool {
	fi, err := os.Lstat(kept)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	uid := uint32(os.Geteuid())
	if cred != nil {
		uid = cred.Uid
	}
	return ok && st.Uid == uid
}

// initDataKey names what an initdb result depends on: the binaries (their
// directory and version, minor version included), initdb's settings, and
// the user the cluster runs as.
func initDataKey(bin string, cred *syscall.Credential) (string, error) {
	out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("pgtest: %s --version: %v", filepath.Join(bin, "postgres"), err)
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if cred != nil {
		uid, gid = int(cred.Uid), int(cred.Gid)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%d:%d\n", bin, strings.TrimSpace(string(out)), strings.Join(initdbArgs, " "), uid, gid)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// copyTree copies the directory from to to (which must not exist), with
// each entry's mode, owned by cred's user when cred is set.
func copyTree(from, to string, cred *syscall.Credential) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		target := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := copyFile(path, target, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("pgtest: %s is neither a file nor a directory", path)
		}
		// Mkdir and OpenFile apply the umask: the mode is set again, as
		// PostgreSQL checks the data directory's.
		if err := os.Chmod(target, info.Mode().Perm()); err != nil {
			return err
		}
		if cred != nil {
			return os.Lchown(target, int(cred.Uid), int(cred.Gid))
		}
		return nil
	})
}

func copyFile(from, to string, mode fs.FileMode) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}
