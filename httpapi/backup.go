package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// MinAdminTokenLen is the shortest operator token accepted: 32 characters
// leave guessing hopeless even without the rate limit.
const MinAdminTokenLen = 32

// Defaults of BackupConfig.
const (
	// DefaultBackupMinRate is the slowest average rate, in bytes per second, a
	// backup download may keep: 1 MiB/s is a slow WAN link; a client slower than
	// that (or one that stops reading) is cut at the deadline.
	DefaultBackupMinRate = 1 << 20
	// DefaultBackupGrace is added to every download's deadline, so a small
	// store over a slow start still gets a whole minute.
	DefaultBackupGrace = time.Minute
	// DefaultBackupsAtOnce is how many backups may be taken at once. Each takes
	// a store-sized temporary file; one at a time bounds that to one copy.
	DefaultBackupsAtOnce = 1
)

// BackupConfig bounds GET /admin/backup.
type BackupConfig struct {
	// Dir holds the temporary copy while it streams; empty means the data directory.
	Dir string
	// MinRate and Grace set the write deadline: Grace + size/MinRate.
	MinRate int64
	Grace   time.Duration
	// AtOnce is how many downloads may run at once; more answer 429.
	AtOnce int
}

func (c *BackupConfig) defaults() {
	if c.MinRate <= 0 {
		c.MinRate = DefaultBackupMinRate
	}
	if c.Grace <= 0 {
		c.Grace = DefaultBackupGrace
	}
	if c.AtOnce <= 0 {
		c.AtOnce = DefaultBackupsAtOnce
	}
}

// deadline is how long a download of size bytes may take.
func (c BackupConfig) deadline(size int64) time.Duration {
	return c.Grace + time.Duration(float64(size)/float64(c.MinRate)*float64(time.Second))
}

// isOperator reports whether token is the operator's. Both sides are hashed
// first, so the comparison takes the same time whatever the length or content.
func (s *Server) isOperator(token string) bool {
	if s.cfg.AdminToken == "" || token == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(s.cfg.AdminToken))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// backup streams a consistent copy of the whole store: every company and the
// server's own keys, so only the operator may have it. The copy is first
// written to a temporary file in one short read transaction; the download
// then reads that file, never the store, under a write deadline sized to the
// file, and the file goes when the request ends, however it ends.
func (s *Server) backup(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	if c.Request().Method == http.MethodHead {
		// HEAD answers what GET would without taking a copy.
		if ext, ok := s.deps.Store.(interface{ BackupExternal() bool }); ok && ext.BackupExternal() {
			return errBackupExternal()
		}
		// The length is the copy's, which HEAD does not take (RFC 9110
		// 9.3.2 lets it go unsaid); the rest is GET's.
		h.Set(echo.HeaderContentType, "application/octet-stream")
		h.Set(echo.HeaderContentDisposition, backupDisposition(s.deps.Now()))
		return c.NoContent(http.StatusOK)
	}
	select {
	case s.backups <- struct{}{}:
	default:
		return &problem.Error{Code: problem.RateLimited, RetryAfter: 30,
			Message: "Another backup is being taken; try again when it has finished."}
	}
	n, size, err := s.streamSnapshot(c)
	<-s.backups // free before logging, so whoever reads the log may start the next one
	switch {
	case size < 0:
		return err // nothing sent yet: the client gets an error body
	case err != nil:
		// The status is gone already; the short body tells the client, the log tells the operator.
		s.deps.Logger.Warn("backup download cut", "bytes", n, "size", size, "err", err)
	default:
		s.deps.Logger.Info("backup streamed", "bytes", n)
	}
	return nil
}

// errBackupExternal answers a backup of a store kept in a database, which
// its operator backs up with the database's own tools.
func errBackupExternal() error {
	return problem.New(problem.BackupExternal, "This server keeps its store in PostgreSQL: back it up with pg_dump (docs/operations.md).")
}

// streamSnapshot takes the snapshot and sends it; size is -1 when it failed
// before anything was sent. The temporary copy is gone when it returns.
func (s *Server) streamSnapshot(c echo.Context) (n, size int64, err error) {
	snap, err := s.deps.Store.Snapshot(s.cfg.Backup.Dir)
	if errors.Is(err, store.ErrNoRoom) {
		s.deps.Logger.Error("backup refused", "err", err)
		return 0, -1, &problem.Error{Code: problem.Unavailable, RetryAfter: 300,
			Message: "The server has too little free disk space for a backup copy; free some, or stop the server and run simrelay admin backup."}
	}
	if errors.Is(err, store.ErrBackupExternal) {
		return 0, -1, errBackupExternal()
	}
	if err != nil {
		return 0, -1, err
	}
	defer snap.Close()
	if err := http.NewResponseController(c.Response()).SetWriteDeadline(time.Now().Add(s.cfg.Backup.deadline(snap.Size))); err != nil {
		s.deps.Logger.Warn("backup: no write deadline", "err", err)
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/octet-stream")
	h.Set(echo.HeaderContentLength, strconv.FormatInt(snap.Size, 10))
	h.Set(echo.HeaderContentDisposition, backupDisposition(s.deps.Now()))
	c.Response().WriteHeader(http.StatusOK)
	n, err = io.Copy(c.Response(), snap)
	return n, snap.Size, err
}

// backupDisposition names the download after the request's time (UTC).
func backupDisposition(now time.Time) string {
	return fmt.Sprintf(`attachment; filename="simrelay-%s.db"`, now.UTC().Format("20060102-150405"))
}
