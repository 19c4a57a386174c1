package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/postgres"
)

// server is the simrelay process under test.
type server struct {
	cmd   *exec.Cmd
	url   string
	pprof string // host:port of the server's pprof listener
}

// openStore opens the store the bench fills before its server starts: a new
// embedded store in dir, or the PostgreSQL database at databaseURL, which
// must hold no company yet (the bench adds one, its phones and its history,
// and never writes where someone's data is).
func openStore(ctx context.Context, dir, databaseURL string) (store.Backend, error) {
	if databaseURL == "" {
		return boltstore.Open(dir, boltstore.Options{BulkLoad: true})
	}
	// Empty: a database holding a company (or another application's
	// tables) is refused before anything is written to it, its schema
	// left unmigrated.
	st, err := postgres.Open(ctx, databaseURL, postgres.Options{Empty: true})
	const own = "nothing was written to it, its schema left as it was: give the bench an empty database of its own (it adds a company, its phones and a history of messages)"
	switch {
	case errors.Is(err, store.ErrNotEmpty):
		return nil, fmt.Errorf("bench: the database holds a company already; %s", own)
	case errors.Is(err, postgres.ErrNoSchema):
		return nil, fmt.Errorf("bench: %w; %s", err, own)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// prepare creates the company and provisions the phones in a new store, and
// returns the API key and the phones' tokens.
func prepare(st store.Backend, fingerprints []string) (apiKey string, tokens []string, companyID uint64, err error) {
	quiet := slog.New(slog.DiscardHandler)
	mailer, err := mail.New(mail.Config{}, st, quiet, time.Now)
	if err != nil {
		return "", nil, 0, err
	}
	accounts, err := account.New(account.Config{}, st, mailer, quiet, time.Now)
	if err != nil {
		return "", nil, 0, err
	}
	c, u, key, err := accounts.CreateCompany("Bench", account.OwnerInput{Email: "bench@example.com", Password: "Bench-pass-1"})
	if err != nil {
		return "", nil, 0, err
	}
	devices := device.New(device.Config{}, st, time.Now)
	for start := 0; start < len(fingerprints); start += 5000 {
		end := min(start+5000, len(fingerprints))
		t, err := devices.Provision(context.Background(), c.ID, u.ID, fingerprints[start:end])
		if err != nil {
			return "", nil, 0, err
		}
		tokens = append(tokens, t...)
	}
	return key, tokens, c.ID, nil
}

// startServer runs `simrelay serve` on a free loopback port, over the
// embedded store in dir or, when databaseURL is set, that database (given
// through the environment, where other users cannot read it).
func startServer(ctx context.Context, bin, dir, databaseURL string, stderr io.Writer, extra ...string) (*server, error) {
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--log-level", "warn",
		"--rate-general", "1000000000/1m", "--rate-auth", "1000000000/1m",
		// The bench's webhook receiver is on loopback.
		"--webhook-allow-private"}
	// Profiles on loopback: the memory readings run the server's GC through
	// them first, so they count live memory, not garbage awaiting collection.
	// Unless the caller names the address, the server takes a free port and
	// says which on stdout (a port found free here and handed over could be
	// taken by another program before the server listened on it).
	pprofAddr := ""
	for i, a := range extra {
		if a == "--pprof-listen" && i+1 < len(extra) {
			pprofAddr = extra[i+1]
		}
	}
	if pprofAddr == "" {
		args = append(args, "--pprof-listen", "127.0.0.1:0")
	}
	// Not ended by ctx (a SIGKILL at the first Ctrl-C): the run stops its
	// phases, then stop ends the server with SIGTERM.
	cmd := exec.Command(bin, append(args, extra...)...)
	cmd.Env = append(serverEnv(os.Environ()), "SIMRELAY_DATABASE_URL="+databaseURL)
	cmd.Stderr = stderr
	diesWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addr, profiles := make(chan string, 1), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, a, ok := strings.Cut(sc.Text(), " pprof profiles on http://"); ok {
				profiles <- strings.TrimSuffix(strings.TrimSpace(a), "/debug/pprof/")
			}
			if _, a, ok := strings.Cut(sc.Text(), " listening on "); ok {
				addr <- strings.TrimSpace(a)
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			_ = cmd.Wait()
			return nil, errors.New("bench: the server exited before listening")
		}
		// The server starts its profiles before it listens, and says so
		// first.
		select {
		case p := <-profiles:
			pprofAddr = p
		default:
		}
		return &server{cmd: cmd, url: a, pprof: pprofAddr}, nil
	case <-ctx.Done():
		(&server{cmd: cmd}).stop()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, errors.New("bench: the server did not listen within 30s")
	}
}

// keptSettings are the server settings a bench's server still takes from
// the environment: the cluster's node timing, which changes no target and
// no figure but how long a node started again waits for its killed run's
// beat to go stale.
var keptSettings = map[string]bool{"SIMRELAY_NODE_LIVE_WINDOW": true}

// serverEnv is the environment of the bench's servers: the bench's own
// (GOGC, GOMAXPROCS and TMPDIR reach them) without the server's settings,
// SIMRELAY_* (but keptSettings). A shell set up for a production server
// names its mail relay, its Stripe account and plans, its e-mail to SMS
// listener: the bench's server took them all, sent its mail through that
// relay, bound that listener, and counted its sends against the plans
// (the free plan refused all but 100, and the bench printed a send -> phone
// latency of 0 ms). The settings the bench wants it gives as flags.
func serverEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SIMRELAY_") && !keptSettings[name] {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// stop ends the server with SIGTERM and waits. Where the system has no
// SIGTERM to send (Windows), the server is killed at once rather than
// waited for in vain.
func (s *server) stop() {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		_ = s.cmd.Process.Kill()
	}
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// memory is the server's resident memory in bytes: all of it, and its
// anonymous part (heap, stacks, runtime), which leaves out the store's
// file pages that the kernel maps in and may drop at will.
func (s *server) memory() (rss, anon int64, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	kb := func(v string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		return n * 1024
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = kb(v)
		} else if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			anon = kb(v)
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("bench: no VmRSS in /proc/PID/status")
	}
	return rss, anon, nil
}

// gc runs a garbage collection in the server (through pprof's heap
// endpoint), so the next readings see live memory.
func (s *server) gc() error {
	res, err := http.Get("http://" + s.pprof + "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return res.Body.Close()
}

// metric reads one gauge from the server's /metrics.
func (s *server) metric(name string) (float64, error) {
	res, err := http.Get(s.url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("bench: no metric %s", name)
}
