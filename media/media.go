package media

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// DefaultMaxBytes caps one file: WhatsApp's own cap for images, audio
// and video is 16 MB; documents over it are refused by the agent (which
// still forwards the text) rather than filling a company's storage budget
// with one file.
const DefaultMaxBytes = 16 << 20

// DefaultUploads bounds the uploads committing at once, server-wide: an
// upload, once spooled, is committed to the store in one write transaction,
// which holds about four times the file in memory while it commits
// (BenchmarkMediaPutAndCopy: 62 MB allocated for a 16 MiB file). Two at
// once keep media's peak near 130 MB of memory. A commit reads a local
// file, so it takes no longer than the store does: the body's arrival, at
// the agent's pace, is not part of it (DefaultSpools).
const DefaultUploads = 2

// DefaultSpools bounds the uploads arriving at once, server-wide: each
// spools at most MaxBytes to a temporary file while its body arrives, so
// sixteen keep media's temporary disk within 256 MiB. One more waits for a
// place at most ChunkTimeout (or takes one another company's upload
// yields: DefaultSpoolsKept), then answers 429 with Retry-After. An
// arriving upload holds one of these, its device's place and its company's
// (UploadsPerDevice, UploadsPerCompany), never a commit's: when the
// commits were also the places of arriving bodies, two companies whose
// agents sent slowly (a minute an upload, the read timeout) held both, and
// every other company's uploads waited.
const DefaultSpools = 16

// DefaultSpoolsKept of the server's arriving places (DefaultSpools) are
// kept for companies with no upload arriving: a company's second and
// later arriving uploads take a place only while more than these are
// free, its first any free place. The uploads of companies that each have
// several arriving thus hold at most the other 8, however many companies
// they are, and the kept ones go one a company: the server's places are
// all held only by uploads of at least 10 companies, where 4 companies'
// slow agents (4 uploads each, as slowly as the server lets them: an hour
// or more over 16 MiB) held all 16 and made every other company's files
// wait. An upload that finds no place it may take waits for one as any
// other.
//
// With every place held, a waiting upload takes the place of another
// company's that yields it (Service.victim): the slowest upload (fewest
// bytes a second) of the company holding the most, at once when that
// company holds two places more than the waiting upload's, and for a
// company holding none, of a company holding one once it has held its
// place half of ChunkTimeout. The upload that yields is answered 429 with
// Retry-After; its agent uploads it again. Where 10 companies' slow agents
// held all 16 places and every other company's files waited a minute and
// were refused, a company holding none gets a place within half a minute,
// and keeps it while slower uploads are there to yield first.
const DefaultSpoolsKept = 8

// busy is the refusal of an upload or a download for want of a place,
// held saying what holds them all ("The server has 16 uploads arriving").
func busy(held string) *problem.Error {
	return &problem.Error{Code: problem.RateLimited, RetryAfter: busyRetrySeconds,
		Message: held + ", the most at once; retry in " + problem.Count(busyRetrySeconds, "second") + "."}
}

// uploadsBusy is the refusal of an upload beyond the n under way of who
// ("device" or "company").
func uploadsBusy(who string, n int) *problem.Error {
	return busy(fmt.Sprintf("The %s has %s under way", who, problem.Count(n, "upload")))
}

// UploadsPerDevice bounds one device's uploads under way: simrelay-agent
// uploads one file at a time, so a second is one its agent gave up (the
// server holds it until its next 256 KiB is UploadChunkTimeout late) or a
// misbehaving agent's; it answers 429 with a short Retry-After. A device's
// slow upload (a slow link may take two hours over 16 MiB) holds only its
// own place: the company's other agents upload meanwhile.
const UploadsPerDevice = 1

// DefaultUploadsPerCompany bounds one company's uploads under way, so that
// one tenant's agents never hold every arriving place (DefaultSpools): a
// further upload answers 429 with a short Retry-After and the agent tries
// again.
const DefaultUploadsPerCompany = 4

// busyRetrySeconds is the Retry-After of an upload or a download refused
// for want of a place (busy): its device's, its company's or the server's,
// which one under way frees as it ends, most in seconds.
const busyRetrySeconds = 5

// DefaultDownloadsPerCompany bounds the downloads of one company's files
// under way (GET /media/{id}, signed links and the console's files alike):
// each holds a connection and up to a 256 KiB chunk while its reader takes
// it, for up to a minute a chunk, so readers that read slowly, or a signed
// link passed around, cost the server at most this many chunks a company.
// A further download answers 429 with a short Retry-After.
const DefaultDownloadsPerCompany = 32

// DefaultURLLifetime is how long a signed URL of a webhook payload works:
// longer than the webhook retry schedule (about two days), so the last
// retry still carries a working link.
const DefaultURLLifetime = 72 * time.Hour

// DefaultChunkTimeout is how long a download may take to accept one
// chunk (store.MediaChunkSize, 256 KiB) of a file: a reader that stalls is
// cut, so it holds no connection, goroutine or chunk for ever; one that
// keeps going, however slowly, may take as long as it needs. It is also
// the longest an upload waits for an arriving place (DefaultSpools).
const DefaultChunkTimeout = time.Minute

// DefaultUploadChunkTimeout is how long an upload may take to send one
// chunk (store.MediaChunkSize, 256 KiB) of its file, the least the server
// takes: 2,185 bytes a second (17.5 kbit/s). A sender that stalls is cut
// (408), so it holds no connection or arriving place for ever; one that
// keeps going may take as long as it needs. It carries a 16 MiB file over
// 2G: GPRS with two uplink timeslots at CS-2 (26.8 kbit/s, the common
// handset's uplink) sends 256 KiB in 78 s and 16 MiB in 84 minutes, EDGE
// (about 100 kbit/s up) 16 MiB in 22 minutes; a single GPRS timeslot
// (13.4 kbit/s: 156 s a chunk) is under it. At the floor itself 16 MiB
// takes 128 minutes. A minute a chunk (35 kbit/s) cut a two-slot GPRS
// upload at its first 256 KiB.
const DefaultUploadChunkTimeout = 2 * time.Minute

// MaxPerMessage is the most files one inbound message names.
const MaxPerMessage = 10

// spoolPrefix starts the name of an upload's temporary file.
const spoolPrefix = "simrelay-upload-"

// MaxFilenameBytes bounds a file's name (UTF-8 bytes).
const MaxFilenameBytes = 255

// Store is what the service needs of the store.
type Store interface {
	// StorageUsed and DailyStorageBudget tell an upload whose length is
	// known that it cannot fit before its body is read (Put).
	StorageUsed(companyID uint64, t time.Time) (int64, error)
	DailyStorageBudget() int64
	PutMedia(m store.Media, src io.Reader, now time.Time) (store.Media, bool, error)
	MediaByKey(companyID, deviceID uint64, key string) (store.Media, error)
	MediaByID(companyID uint64, id string) (store.Media, error)
	CopyMedia(w io.Writer, id string, off, n int64) (int64, error)
}

// KeySecret names the store secret (store.Backend.Secret) that is
// Config.Key: the server's own, made at its first start; simrelay admin
// rotate-keys replaces it.
const KeySecret = "media-url-hmac"

// Config configures the service. Zero values take their Default constants.
type Config struct {
	// PublicURL is the server's address, the base of signed URLs.
	PublicURL string
	// Key signs URLs (HMAC-SHA256): a server secret (store.Secret).
	Key      []byte
	MaxBytes int64
	Uploads  int // committing at once (DefaultUploads)
	Spools   int // arriving at once (DefaultSpools)
	// SpoolsKept of Spools are kept for companies with no upload arriving
	// (DefaultSpoolsKept, or half of Spools when that is fewer; below 0:
	// none).
	SpoolsKept        int
	UploadsPerCompany int // under way at once (DefaultUploadsPerCompany)
	// DownloadsPerCompany bounds the downloads of a company's files under
	// way (DefaultDownloadsPerCompany).
	DownloadsPerCompany int
	URLLifetime         time.Duration
	ChunkTimeout        time.Duration // DefaultChunkTimeout
	UploadChunkTimeout  time.Duration // DefaultUploadChunkTimeout
	// TempDir holds uploads while they arrive (os.TempDir() when empty).
	// When set it is the server's own, made (0700) at the first upload:
	// New removes the spooled uploads a crash (kill -9, power loss) left
	// there, up to Spools times MaxBytes each time; os.TempDir() is never
	// cleared.
	TempDir string
}

// Service stores and serves media.
type Service struct {
	cfg   Config
	st    Store
	now   func() time.Time
	slots chan struct{} // one per upload committing

	// The places under way, counted in this process's memory: on a cluster
	// each node counts its own. Guarded by mu.
	mu       sync.Mutex
	sending  map[uint64]int      // device id -> uploads under way
	active   map[uint64]int      // company id -> uploads under way
	reading  map[uint64]int      // company id -> downloads under way
	spools   map[*spool]struct{} // uploads arriving (Spools at most)
	spooling map[uint64]int      // company id -> uploads arriving
	freed    chan struct{}       // made by an upload waiting for an arriving place, closed (and dropped) when one is freed
}

// New returns the service.
func New(cfg Config, st Store, now func() time.Time) (*Service, error) {
	if len(cfg.Key) < 16 {
		return nil, errors.New("media: the URL signing key must have at least 16 bytes")
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Uploads <= 0 {
		cfg.Uploads = DefaultUploads
	}
	if cfg.Spools <= 0 {
		cfg.Spools = DefaultSpools
	}
	switch {
	case cfg.SpoolsKept == 0:
		cfg.SpoolsKept = min(DefaultSpoolsKept, cfg.Spools/2)
	case cfg.SpoolsKept < 0:
		cfg.SpoolsKept = 0
	case cfg.SpoolsKept >= cfg.Spools:
		return nil, errors.New("media: the arriving places kept for companies with none arriving must be fewer than the places")
	}
	if cfg.UploadsPerCompany <= 0 {
		cfg.UploadsPerCompany = DefaultUploadsPerCompany
	}
	if cfg.DownloadsPerCompany <= 0 {
		cfg.DownloadsPerCompany = DefaultDownloadsPerCompany
	}
	if cfg.URLLifetime <= 0 {
		cfg.URLLifetime = DefaultURLLifetime
	}
	if cfg.ChunkTimeout <= 0 {
		cfg.ChunkTimeout = DefaultChunkTimeout
	}
	if cfg.UploadChunkTimeout <= 0 {
		cfg.UploadChunkTimeout = DefaultUploadChunkTimeout
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if cfg.TempDir != "" {
		// The directory is listed, not globbed: its path is the operator's,
		// and a '[' or '*' in it is part of the name, not a pattern.
		entries, err := os.ReadDir(cfg.TempDir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("media: spool: %w", err)
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), spoolPrefix) || e.IsDir() {
				continue
			}
			if err := os.Remove(filepath.Join(cfg.TempDir, e.Name())); err != nil {
				return nil, fmt.Errorf("media: spool: %w", err)
			}
		}
	}
	return &Service{cfg: cfg, st: st, now: now, slots: make(chan struct{}, cfg.Uploads),
		sending: map[uint64]int{}, active: map[uint64]int{}, reading: map[uint64]int{},
		spools: map[*spool]struct{}{}, spooling: map[uint64]int{}}, nil
}

// MaxBytes is the cap of one file.
func (s *Service) MaxBytes() int64 { return s.cfg.MaxBytes }

// Upload is one file an agent sends.
type Upload struct {
	// Key is the agent's name for it, 1 to 200 bytes: its inbound
	// client_id and the file's place ("<client_id>/0"). A repeated key
	// answers the first upload, so an agent that lost the answer simply
	// uploads again.
	Key         string
	ContentType string
	Filename    string
	// Length is the request's Content-Length (-1 when unknown).
	Length int64
	Body   io.Reader
	// ReadDeadline, when set, moves the deadline of Body's reads (the
	// connection's): each 256 KiB must arrive within UploadChunkTimeout, in
	// place of the server's one deadline for the whole request, so a slow
	// link's upload arrives whole and a stalled one is cut.
	ReadDeadline func(time.Time) error
	// Recheck, when set, authorises the upload again once its body has
	// arrived whole, just before it is stored: the device's credential was
	// checked when the headers came, and the body may take far longer to
	// follow (UploadChunkTimeout for each 256 KiB). A device paired again (its
	// token replaced), disabled or deleted meanwhile stores nothing: Put
	// returns Recheck's error, and the spooled file is removed.
	Recheck func() error
}

// Put stores an upload of the device. It answers the stored file and
// whether the key was known already.
func (s *Service) Put(ctx context.Context, dev store.Device, up Upload) (store.Media, bool, error) {
	if up.Key == "" || len(up.Key) > 200 || !utf8.ValidString(up.Key) {
		return store.Media{}, false, problem.Invalid("key", "is required: 1 to 200 bytes of UTF-8 naming the upload, such as the inbound client_id and the file's place")
	}
	if len(up.Filename) > MaxFilenameBytes || !utf8.ValidString(up.Filename) || strings.IndexFunc(up.Filename, badInName) >= 0 {
		return store.Media{}, false, problem.Invalid("filename", fmt.Sprintf("must be at most %d bytes of UTF-8, without slashes, control characters or text-direction marks", MaxFilenameBytes))
	}
	if m, err := s.st.MediaByKey(dev.CompanyID, dev.ID, up.Key); err == nil {
		return m, true, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.Media{}, false, err
	}
	if up.Length > s.cfg.MaxBytes {
		return store.Media{}, false, tooLarge(s.cfg.MaxBytes)
	}
	if err := s.fits(dev.CompanyID, up.Length); err != nil {
		return store.Media{}, false, err
	}
	if !s.enter(s.sending, dev.ID, UploadsPerDevice) {
		return store.Media{}, false, uploadsBusy("device", UploadsPerDevice)
	}
	defer s.leave(s.sending, dev.ID)
	if !s.enter(s.active, dev.CompanyID, s.cfg.UploadsPerCompany) {
		return store.Media{}, false, uploadsBusy("company", s.cfg.UploadsPerCompany)
	}
	defer s.leave(s.active, dev.CompanyID)
	// An upload waits for an arriving place at most ChunkTimeout: nothing
	// tells the server that its client has gone while the body is unread
	// (net/http cancels ctx only once the body was read to its end), so an
	// upload whose client gave up (an agent gives up after
	// UploadChunkTimeout for each 256 KiB and one more for the answer)
	// would otherwise hold its company's place until a spool freed,
	// and the agent's next try be refused for its own abandoned one.
	cut := func() {}
	if up.ReadDeadline != nil {
		cut = func() { _ = up.ReadDeadline(time.Now()) }
	}
	sp, err := s.arrive(ctx, dev.CompanyID, cut)
	if err != nil {
		return store.Media{}, false, err
	}
	defer s.arrived(sp)
	if s.cfg.TempDir != "" {
		if err := os.MkdirAll(s.cfg.TempDir, 0o700); err != nil {
			return store.Media{}, false, spoolFailed(err)
		}
	}
	f, err := os.CreateTemp(s.cfg.TempDir, spoolPrefix+"*")
	if err != nil {
		return store.Media{}, false, spoolFailed(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	body := &arrival{r: io.LimitReader(up.Body, s.cfg.MaxBytes+1), deadline: up.ReadDeadline, timeout: s.cfg.UploadChunkTimeout, spool: sp}
	if err := body.extend(); err != nil {
		return store.Media{}, false, err
	}
	n, err := io.Copy(f, body)
	if body.err != nil && sp.yielded.Load() {
		return store.Media{}, false, &problem.Error{Code: problem.RateLimited, RetryAfter: busyRetrySeconds,
			Message: fmt.Sprintf("The server's %s for arriving uploads were all held, and this upload, the slowest of a company holding more of them, gave its place to another company's; retry in %s.",
				problem.Count(s.cfg.Spools, "place"), problem.Count(busyRetrySeconds, "second"))}
	}
	if body.err != nil {
		if ne := net.Error(nil); errors.As(body.err, &ne) && ne.Timeout() {
			return store.Media{}, false, problem.New(problem.RequestTimeout, fmt.Sprintf("No %d KiB of the upload arrived within %g s; upload it again.", store.MediaChunkSize>>10, s.cfg.UploadChunkTimeout.Seconds()))
		}
		return store.Media{}, false, problem.New(problem.ValidationFailed, "The upload did not arrive whole: "+body.err.Error())
	}
	if err != nil {
		return store.Media{}, false, spoolFailed(err)
	}
	if n > s.cfg.MaxBytes {
		return store.Media{}, false, tooLarge(s.cfg.MaxBytes)
	}
	if n == 0 {
		return store.Media{}, false, problem.New(problem.ValidationFailed, "The upload is empty.")
	}
	head := make([]byte, 512)
	k, _ := f.ReadAt(head, 0)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return store.Media{}, false, spoolFailed(err)
	}
	m := store.Media{ID: "med_" + strings.ReplaceAll(uuid.NewString(), "-", ""), CompanyID: dev.CompanyID, DeviceID: dev.ID,
		Key: up.Key, ContentType: ContentType(up.ContentType, head[:k]), Filename: up.Filename, Size: n}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return store.Media{}, false, ctx.Err()
	}
	if up.Recheck != nil {
		if err := up.Recheck(); err != nil {
			return store.Media{}, false, err
		}
	}
	stored, dup, err := s.st.PutMedia(m, f, s.now())
	switch {
	case errors.Is(err, store.ErrDeviceGone):
		return store.Media{}, false, problem.New(problem.Unauthorized, "The device was deleted.")
	case err != nil:
		return store.Media{}, false, sms.Refusal(err, s.now())
	}
	return stored, dup, nil
}

// spool is an upload arriving: one of the server's arriving places
// (Spools). Guarded by the service's mu but for received and yielded.
type spool struct {
	company uint64
	began   time.Time
	// cut interrupts the body's read (its connection's deadline set to
	// now), so an upload that yields its place lets go of it at once.
	cut      func()
	received atomic.Int64 // bytes of the body read so far
	// yielded is set, and cut called, once the place is promised to heir:
	// the upload ends (429) at its next read, and its end hands the place
	// over.
	yielded atomic.Bool
	heir    *claim
}

// claim is an upload waiting for the place of one that yields it.
type claim struct {
	company   uint64
	cut       func()
	got       chan struct{} // closed once place is set
	place     *spool
	abandoned bool // its wait ended before the place came
}

// uploadYield is how long an arriving upload of a company holding a single
// place keeps it before it may yield it to an upload of a company holding
// none (half of ChunkTimeout, the longest such an upload waits: 30 s).
// Uploads of a company holding two places or more than the waiting one's
// yield at once.
func (s *Service) uploadYield() time.Duration { return s.cfg.ChunkTimeout / 2 }

// arrive takes an arriving place for an upload of the company, waiting
// for one at most ChunkTimeout: any free place for the company's first
// upload arriving, one beyond the SpoolsKept for its others. With none
// free, it takes the place of another company's upload that yields it
// (victim). It answers 429 when none came.
func (s *Service) arrive(ctx context.Context, companyID uint64, cut func()) (*spool, error) {
	wait := time.NewTimer(s.cfg.ChunkTimeout)
	defer wait.Stop()
	var c *claim
	var turn *time.Timer
	defer func() {
		if turn != nil {
			turn.Stop()
		}
	}()
	for {
		s.mu.Lock()
		if c != nil && c.place != nil {
			s.mu.Unlock()
			return c.place, nil
		}
		free, mine := s.cfg.Spools-len(s.spools), s.spooling[companyID]
		if c == nil && free > 0 && (mine == 0 || free > s.cfg.SpoolsKept) {
			sp := s.take(companyID, cut)
			s.mu.Unlock()
			return sp, nil
		}
		var next time.Duration
		if c == nil && free <= 0 {
			var v *spool
			if v, next = s.victim(companyID, time.Now()); v != nil {
				// Cut while mu is held: v's upload is still under way (its
				// end, arrived, takes mu), so its connection is still its own.
				c = &claim{company: companyID, cut: cut, got: make(chan struct{})}
				v.heir = c
				v.yielded.Store(true)
				v.cut()
				next = 0
			}
		}
		if s.freed == nil {
			s.freed = make(chan struct{})
		}
		freed := s.freed
		s.mu.Unlock()
		var got <-chan struct{}
		if c != nil {
			got = c.got
		}
		var turned <-chan time.Time
		if next > 0 {
			if turn == nil {
				turn = time.NewTimer(next)
			} else {
				turn.Reset(next)
			}
			turned = turn.C
		}
		select {
		case <-freed:
		case <-got:
		case <-turned:
		case <-wait.C:
			if sp := s.abandon(c); sp != nil {
				return sp, nil
			}
			if free > 0 {
				return nil, &problem.Error{Code: problem.RateLimited, RetryAfter: busyRetrySeconds,
					Message: fmt.Sprintf("The company has %s arriving, and the server keeps its last %s for companies with none; retry in %s.",
						problem.Count(mine, "upload"), problem.Count(s.cfg.SpoolsKept, "place"), problem.Count(busyRetrySeconds, "second"))}
			}
			return nil, busy(fmt.Sprintf("The server has %s arriving", problem.Count(s.cfg.Spools, "upload")))
		case <-ctx.Done():
			if sp := s.abandon(c); sp != nil {
				return sp, nil
			}
			return nil, ctx.Err()
		}
	}
}

// abandon ends the wait of c (nil: arrive claimed no place) and returns
// the place it was given meanwhile, nil when none came: then the place
// promised goes to no one when its upload ends (arrived).
func (s *Service) abandon(c *claim) *spool {
	if c == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.place == nil {
		c.abandoned = true
	}
	return c.place
}

// victim is the arriving upload that yields its place to a waiting upload
// of company, nil when none does: of the uploads of the companies holding
// at least two places more than company, or, when it holds none, of those
// holding one whose uploads have held their places uploadYield, one of
// the company holding the most, the one that received the fewest bytes a
// second since it began (the longest under way among equals). A place
// already promised counts for the company it goes to. When v is nil, next
// is how long until an upload of a company holding one may yield to a
// company holding none (0: none will by waiting). s.mu held.
func (s *Service) victim(company uint64, now time.Time) (v *spool, next time.Duration) {
	held := map[uint64]int{}
	for sp := range s.spools {
		if sp.heir != nil {
			held[sp.heir.company]++
		} else {
			held[sp.company]++
		}
	}
	h := held[company]
	var most int
	var slowest float64
	for sp := range s.spools {
		if sp.heir != nil || sp.company == company {
			continue
		}
		k := held[sp.company]
		switch {
		case k >= h+2:
		case k == 1 && h == 0:
			if age := now.Sub(sp.began); age < s.uploadYield() {
				if d := s.uploadYield() - age; next == 0 || d < next {
					next = d
				}
				continue
			}
		default:
			continue
		}
		rate := float64(sp.received.Load()) / max(now.Sub(sp.began).Seconds(), 1e-3)
		if v == nil || k > most || k == most && (rate < slowest || rate == slowest && sp.began.Before(v.began)) {
			v, most, slowest = sp, k, rate
		}
	}
	return v, next
}

// take counts a place for an upload of the company. s.mu held.
func (s *Service) take(companyID uint64, cut func()) *spool {
	sp := &spool{company: companyID, began: time.Now(), cut: cut}
	s.spools[sp] = struct{}{}
	s.spooling[companyID]++
	s.wake()
	return sp
}

// wake tells the uploads waiting for a place that the places changed.
// s.mu held.
func (s *Service) wake() {
	if s.freed != nil {
		close(s.freed)
		s.freed = nil
	}
}

// arrived gives back the arriving place arrive took, to the upload it was
// promised to if any, and wakes the uploads waiting for one.
func (s *Service) arrived(sp *spool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.spools, sp)
	if s.spooling[sp.company]--; s.spooling[sp.company] <= 0 {
		delete(s.spooling, sp.company)
	}
	if c := sp.heir; c != nil && !c.abandoned {
		c.place = s.take(c.company, c.cut)
		close(c.got)
	}
	s.wake()
}

// fits refuses, before its body is read, an upload of length bytes (-1:
// not known, nothing to tell) that would take the company past its daily
// storage budget, with the refusal its commit would meet: the agent's link
// need not carry a file of up to MaxBytes (a phone's mobile data, up to an
// hour on a slow link) to learn what its headers already tell. The commit
// counts it again, so a day that fills meanwhile still refuses it there.
func (s *Service) fits(companyID uint64, length int64) error {
	budget := s.st.DailyStorageBudget()
	if budget <= 0 || length < 0 {
		return nil
	}
	now := s.now()
	used, err := s.st.StorageUsed(companyID, now)
	if err != nil {
		return err
	}
	if cost := length + store.MediaRecordCost; used+cost > budget {
		return sms.Refusal(&store.BudgetError{CompanyID: companyID, Limit: budget, Used: used, Cost: cost, Reset: store.NextDay(now)}, now)
	}
	return nil
}

// arrival is an upload's body as it is spooled. err is the failure of its
// read (the upload did not arrive whole, or stalled: the request's fault),
// which tells it from a failure to write the spool (the server's). With a
// deadline, each store.MediaChunkSize bytes that arrive give the next ones
// timeout more.
type arrival struct {
	r        io.Reader
	err      error
	deadline func(time.Time) error
	timeout  time.Duration
	since    int    // bytes read since the deadline last moved
	spool    *spool // its place, which it may have to yield
}

// errYielded ends the read of an upload that yielded its place.
var errYielded = errors.New("media: the upload yielded its place")

func (a *arrival) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	a.spool.received.Add(int64(n))
	if err != io.EOF && a.spool.yielded.Load() {
		err = errYielded
	}
	if err != nil && err != io.EOF {
		a.err = err
	}
	if a.since += n; a.since >= store.MediaChunkSize && err == nil {
		err = a.extend()
	}
	return n, err
}

// extend moves the read deadline timeout from now (nothing without one).
func (a *arrival) extend() error {
	a.since = 0
	if a.deadline == nil {
		return nil
	}
	if err := a.deadline(time.Now().Add(a.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("media: read deadline: %w", err)
	}
	if a.spool.yielded.Load() {
		// Cut while the deadline moved: cut again.
		_ = a.deadline(time.Now())
	}
	return nil
}

// spoolFailed is the error of a spool the server could not write: a full
// disk (or quota, or file size limit) is store.ErrDiskFull, 503 as the
// store's own; anything else a server error. After either the agent keeps
// the file and uploads it again, where a 400 makes it forward the message
// without the file.
func spoolFailed(err error) error {
	if store.NoSpace(err) {
		return fmt.Errorf("%w: media spool: %w", store.ErrDiskFull, err)
	}
	return fmt.Errorf("media: spool: %w", err)
}

// badInName are the characters a file's name may not hold: path
// separators; control characters (line breaks included), which hide in a
// listing; and the text-direction controls, with which
// "invoice\u202Efdp.exe" shows as "invoiceexe.pdf" in the console and in a
// browser's download.
func badInName(r rune) bool {
	return r == '/' || r == '\\' || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// enter takes one of the most places in places of id (a device's uploads,
// or a company's uploads or downloads, under way); false when it has them
// all.
func (s *Service) enter(places map[uint64]int, id uint64, most int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if places[id] >= most {
		return false
	}
	places[id]++
	return true
}

// leave gives back a place enter took.
func (s *Service) leave(places map[uint64]int, id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if places[id]--; places[id] <= 0 {
		delete(places, id)
	}
}

func tooLarge(max int64) error {
	return problem.New(problem.PayloadTooLarge, fmt.Sprintf("A media file may have at most %d bytes.", max))
}

// Get returns the company's file (ErrNotFound for another company's).
func (s *Service) Get(companyID uint64, id string) (store.Media, error) {
	return s.st.MediaByID(companyID, id)
}

// Serve answers a file (m, as Get returned it), for the API and the
// console alike. It is a stranger's bytes served from the server's origin,
// so nothing in it may run there: only images a browser shows are inline,
// everything else an attachment (Disposition); the browser may not guess
// another type (nosniff); and a sandbox CSP keeps even a file opened
// directly from running script. A file never changes, so its id in quotes
// is its ETag. A HEAD gets the headers alone. Each chunk must be taken
// within ChunkTimeout.
//
// One byte range (Range: bytes=first-last, first- or -suffix) is answered
// 206 with that part, so a player can seek and a download resume. Several
// ranges, another unit, a Range that does not parse, or an If-Range naming
// anything but the file's ETag get the whole file (a server may ignore
// Range). An If-None-Match naming the ETag (or *) is answered 304 without
// a body, before any Range. A range that starts at or past the file's end, or a suffix of no
// bytes (bytes=-0), is refused before
// anything is written: Serve returns a 416 *problem.Error
// (range_not_satisfiable) for the caller to send, Content-Range: bytes */size set. Any other error is the copy's,
// after the status went out: the client sees a short body. A company's
// files are downloaded at most DownloadsPerCompany at once: another GET is
// refused (429 rate_limited, Retry-After) before anything is written.
func (s *Service) Serve(w http.ResponseWriter, r *http.Request, m store.Media) error {
	return s.serve(w, r, m, cacheControl)
}

// ServeBehindSession is Serve for a page that a session guards (the
// console's files): the browser may keep the file, but asks again before
// each use (no-cache), its ETag sparing the body while the session stands.
// Once it has ended (signed out, idle) the answer is the sign-in page, not
// the copy the browser kept: max-age=300 let the next person at a shared
// computer open the files of the last one for five minutes after sign-out.
func (s *Service) ServeBehindSession(w http.ResponseWriter, r *http.Request, m store.Media) error {
	return s.serve(w, r, m, sessionCacheControl)
}

// serve is Serve with cc the Cache-Control of the file and of its 304.
func (s *Service) serve(w http.ResponseWriter, r *http.Request, m store.Media, cc string) error {
	h := w.Header()
	etag := `"` + m.ID + `"`
	off, n, status := int64(0), m.Size, http.StatusOK
	// A client that holds the file already (a browser's cache revalidating
	// after max-age) names its ETag in If-None-Match: it gets 304 and no
	// body, before any Range (RFC 9110 sections 13.1.2 and 13.2.2), and
	// takes no download place.
	if noneMatchFails(r.Header.Values("If-None-Match"), etag) {
		h.Set("ETag", etag)
		h.Set("Cache-Control", cc)
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	if spec := r.Header.Get("Range"); spec != "" && (r.Header.Get("If-Range") == "" || r.Header.Get("If-Range") == etag) {
		switch first, count, parsed, fits := byteRange(spec, m.Size); {
		case parsed && !fits:
			h.Set("Accept-Ranges", "bytes")
			h.Set("ETag", etag)
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", m.Size))
			return &problem.Error{Code: problem.RangeNotSatisfiable, Field: "Range",
				Message: fmt.Sprintf("The file has %s; ask for a range that starts before its end.", problem.Count(m.Size, "byte"))}
		case parsed:
			off, n, status = first, count, http.StatusPartialContent
		}
	}
	// A refused download carries none of the file's headers: a 429 with
	// the Content-Range of the part asked for would say it holds that part.
	if r.Method != http.MethodHead {
		if !s.enter(s.reading, m.CompanyID, s.cfg.DownloadsPerCompany) {
			return busy(fmt.Sprintf("The company's files have %s under way", problem.Count(s.cfg.DownloadsPerCompany, "download")))
		}
		defer s.leave(s.reading, m.CompanyID)
	}
	h.Set("Accept-Ranges", "bytes")
	h.Set("ETag", etag)
	if status == http.StatusPartialContent {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, m.Size))
	}
	h.Set("Content-Type", m.ContentType)
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	h.Set("Content-Disposition", Disposition(m))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	h.Set("Cache-Control", cc)
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return nil
	}
	rc := http.NewResponseController(w)
	_, err := s.st.CopyMedia(writeFunc(func(chunk []byte) (int, error) {
		// A writer without deadlines (a test's recorder) is written unbounded.
		if err := rc.SetWriteDeadline(time.Now().Add(s.cfg.ChunkTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return 0, fmt.Errorf("media: write deadline: %w", err)
		}
		return w.Write(chunk)
	}), m.ID, off, n)
	return err
}

// cacheControl is the Cache-Control of a file served, and of its 304: a
// company's file, kept by the client's own cache for five minutes.
const cacheControl = "private, max-age=300"

// sessionCacheControl is ServeBehindSession's: kept, but asked for again
// (with its ETag) before each use.
const sessionCacheControl = "private, no-cache"

// noneMatchFails reports whether If-None-Match (its header lines, each a
// list of entity tags, or *) names etag: weakly compared, as RFC 9110
// section 13.1.2 says, so W/"id" names "id" too.
func noneMatchFails(lines []string, etag string) bool {
	for _, line := range lines {
		for _, tag := range strings.Split(line, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
				return true
			}
		}
	}
	return false
}

// writeFunc is a function as an io.Writer.
type writeFunc func([]byte) (int, error)

func (f writeFunc) Write(p []byte) (int, error) { return f(p) }

// URL is a link to the file that works without a credential until
// expires: the base URL, the file's id and the expiry, signed.
func (s *Service) URL(id string) (string, time.Time) {
	exp := s.now().Add(s.cfg.URLLifetime).Truncate(time.Second).UTC()
	e := strconv.FormatInt(exp.Unix(), 10)
	q := url.Values{"expires": {e}, "signature": {s.sign(id, e)}}
	return s.cfg.PublicURL + "/media/" + url.PathEscape(id) + "?" + q.Encode(), exp
}

func (s *Service) sign(id, expires string) string {
	mac := hmac.New(sha256.New, s.cfg.Key)
	mac.Write([]byte("media\x00" + id + "\x00" + expires))
	return hex.EncodeToString(mac.Sum(nil))
}

// ErrBadSignature is a signed URL that is forged, altered or expired.
var ErrBadSignature = errors.New("media: the link's signature is not valid or it has expired")

// Verify checks a signed URL's expires and signature for the file id.
func (s *Service) Verify(id, expires, signature string) error {
	e, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || !hmac.Equal([]byte(signature), []byte(s.sign(id, expires))) {
		return ErrBadSignature
	}
	if !s.now().Before(time.Unix(e, 0)) {
		return ErrBadSignature
	}
	return nil
}

// allowed are the content types a file may be stored as; anything else
// is application/octet-stream (a download).
var allowed = map[string]bool{
	"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true, "image/heic": true, "image/heif": true,
	"audio/ogg": true, "audio/mpeg": true, "audio/mp4": true, "audio/aac": true, "audio/amr": true, "audio/x-caf": true, "audio/wav": true,
	"video/mp4": true, "video/3gpp": true, "video/quicktime": true, "video/webm": true,
	"application/pdf": true, "text/plain": true, "text/csv": true, "application/zip": true, "application/octet-stream": true,
	"application/msword": true, "application/vnd.ms-excel": true, "application/vnd.ms-powerpoint": true,
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document":   true,
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":         true,
	"application/vnd.openxmlformats-officedocument.presentationml.presentation": true,
	"text/vcard": true,
}

// inline are the images a browser may show in a page: the bytes must
// sniff as the same type, so a script labelled image/png stays a download.
var inline = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// ContentType is the type a file is stored and served as: the declared
// type without parameters when it is on the allowed list, and for an image
// shown inline only when its first bytes say the same; otherwise
// application/octet-stream.
func ContentType(declared string, head []byte) string {
	mt, _, err := mime.ParseMediaType(declared)
	if err != nil || !allowed[strings.ToLower(mt)] {
		return "application/octet-stream"
	}
	mt = strings.ToLower(mt)
	if inline[mt] {
		sniffed, _, _ := mime.ParseMediaType(http.DetectContentType(head))
		if sniffed != mt {
			return "application/octet-stream"
		}
	}
	if strings.HasPrefix(mt, "text/") {
		// Served as text/plain's kin with a charset a browser never guesses.
		return mt + "; charset=utf-8"
	}
	return mt
}

// Inline says whether a stored content type is shown in a page rather than
// downloaded.
func Inline(contentType string) bool { return inline[contentType] }

// Disposition is the Content-Disposition of a file: inline for the images
// a browser shows, attachment for everything else, with its name.
func Disposition(m store.Media) string {
	kind := "attachment"
	if Inline(m.ContentType) {
		kind = "inline"
	}
	name := m.Filename
	if name == "" {
		name = m.ID
	}
	if v := mime.FormatMediaType(kind, map[string]string{"filename": name}); v != "" {
		return v
	}
	return kind + `; filename="` + m.ID + `"`
}
