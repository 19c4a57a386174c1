package media

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Ten companies whose agents each send four uploads, each 256 KiB within
// every half UploadChunkTimeout (twice the server's floor: none is cut for
// its pace), hold all 16 arriving places (8 shared, 8 kept one a
// company). Another company's upload takes the place of the slowest
// upload of a company holding two or more, at once: that one is answered
// 429 rate_limited with Retry-After, and its agent uploads it again. It
// waited a minute and was refused, for as long as the slow ones lasted:
// two hours each at the floor over 16 MiB.
func TestTenSlowCompaniesYieldAPlaceToAnother(t *testing.T) {
	t.Parallel()
	const companies, each = 10, DefaultUploadsPerCompany
	// Forty uploads hold their places at twice the floor's pace: with 3 s
	// for each 256 KiB, a loaded machine (go test's packages side by side,
	// under -race) let some fall behind and lose their places, and the
	// places were no longer all held. Nothing here waits this long.
	chunkTimeout := 10 * time.Second
	counts := make([]int, companies+1)
	for c := range companies {
		counts[c] = each
	}
	counts[companies] = 1
	s, devs := companiesService(t, Config{ChunkTimeout: chunkTimeout, UploadChunkTimeout: chunkTimeout}, counts...)
	srv, answered := uploadServer(t, s, devs)
	answers := make(chan slowAnswer, companies*each)
	// One company after the other, as the places fill for the old rule:
	// the first two take the 8 shared places, the next eight one kept
	// place each, and their other uploads wait. Each company's uploads are
	// waited for until each is under way or answered, not until all four
	// are under way at once: a waiting one may already have lost its place
	// to a later waiter. Out of this order the places may rest at 15: the
	// last one kept for a company holding none, and every company holding
	// one.
	for c := range companies {
		for d := range each {
			slowSend(t, srv, c, d, 32<<10, chunkTimeout/16, answers)
		}
		poll.Until(t, fmt.Sprintf("company %d's uploads under way or answered", c), func() bool {
			return underWay(s, devs[c][0].CompanyID)+answered(c) == each
		})
	}
	poll.Until(t, "every arriving place held by the slow companies", func() bool { return arrivingPlaces(s) == DefaultSpools })

	quickUpload(t, srv, companies, fmt.Sprintf("an upload of another company while %d companies hold every arriving place", companies))
	a := yieldedAnswer(t, answers, chunkTimeout)
	if a.retryAfter != strconv.Itoa(busyRetrySeconds) {
		t.Fatalf("the upload that yielded its place: Retry-After %q, want %d", a.retryAfter, busyRetrySeconds)
	}
}

// Sixteen companies that each hold one arriving place, and every place
// with it, for half of ChunkTimeout at least: another company's upload
// takes the place of the one that received the fewest bytes a second,
// here the company whose agent sends half as fast as the others, started
// among them. It waited ChunkTimeout and was refused, however many
// companies waited, for as long as the sixteen lasted.
func TestTheSlowestOfSixteenYieldsToASeventeenthCompany(t *testing.T) {
	t.Parallel()
	const companies, slowest = DefaultSpools, 5
	chunkTimeout := 3 * time.Second
	counts := make([]int, companies+1)
	for c := range counts {
		counts[c] = 1
	}
	s, devs := companiesService(t, Config{ChunkTimeout: chunkTimeout, UploadChunkTimeout: chunkTimeout}, counts...)
	srv, _ := uploadServer(t, s, devs)
	answers := make(chan slowAnswer, companies)
	for c := range companies {
		part := 32 << 10
		if c == slowest {
			part = 16 << 10
		}
		slowSend(t, srv, c, 0, part, chunkTimeout/16, answers)
	}
	poll.Until(t, "every arriving place held, one a company", func() bool { return arrivingPlaces(s) == DefaultSpools })
	// The rule's own time: a place held half of ChunkTimeout may yield to
	// a company holding none.
	<-time.After(chunkTimeout / 2)

	quickUpload(t, srv, companies, "an upload of a seventeenth company while sixteen hold one arriving place each")
	if a := yieldedAnswer(t, answers, chunkTimeout); a.company != slowest {
		t.Fatalf("the upload that yielded its place: company %d's, want the slowest, company %d's", a.company, slowest)
	}
}

// underWay is the number of the company's uploads under way, arriving
// or waiting for a place.
func underWay(s *Service, companyID uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[companyID]
}

// arrivingPlaces is the number of the server's arriving places held.
func arrivingPlaces(s *Service) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.spools)
}

// uploadServer serves uploads over loopback as the upload route does:
// ?c= and &d= name the company's and the device's place in devs, key the
// upload's key; a stored upload answers 201 and its size, a refusal its
// status, Retry-After and message, and closes the connection. answered is
// how many uploads of company c (its place in devs) Put has answered.
func uploadServer(t *testing.T, s *Service, devs [][]store.Device) (srv *httptest.Server, answered func(c int) int) {
	count := make([]atomic.Int32, len(devs))
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c, d int
		fmt.Sscan(r.URL.Query().Get("c"), &c)
		fmt.Sscan(r.URL.Query().Get("d"), &d)
		m, _, err := s.Put(r.Context(), devs[c][d], Upload{Key: r.URL.Query().Get("key"), ContentType: "video/mp4", Length: r.ContentLength,
			Body: r.Body, ReadDeadline: http.NewResponseController(w).SetReadDeadline})
		count[c].Add(1)
		if err != nil {
			w.Header().Set("Connection", "close") // as the upload route: the rest of the body is not read
			if pe, ok := problem.As(err); ok {
				if pe.RetryAfter > 0 {
					w.Header().Set("Retry-After", strconv.Itoa(pe.RetryAfter))
				}
				w.WriteHeader(pe.Status())
				fmt.Fprint(w, pe.Message)
				return
			}
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%d", m.Size)
	}))
	t.Cleanup(srv.Close)
	return srv, func(c int) int { return int(count[c].Load()) }
}

// slowAnswer is the server's answer to a slow upload.
type slowAnswer struct {
	company, status  int
	retryAfter, body string
}

// slowSend starts an upload of device d of company c that declares
// DefaultMaxBytes and sends part bytes every tick until the server
// answers or the test ends (at most a minute); its answer goes to answers.
func slowSend(t *testing.T, srv *httptest.Server, c, d, part int, tick time.Duration, answers chan<- slowAnswer) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		conn.Close()
	})
	fmt.Fprintf(conn, "POST /?c=%d&d=%d&key=slow-%d-%d HTTP/1.1\r\nHost: x\r\nContent-Type: video/mp4\r\nContent-Length: %d\r\n\r\n",
		c, d, c, d, DefaultMaxBytes)
	go func() {
		_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answers <- slowAnswer{company: c}
			return
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		answers <- slowAnswer{company: c, status: res.StatusCode, retryAfter: res.Header.Get("Retry-After"), body: string(body)}
	}()
	go func() {
		data := bytes.Repeat([]byte{'v'}, part)
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		deadline := time.After(time.Minute)
		for range DefaultMaxBytes / part {
			if _, err := conn.Write(data); err != nil {
				return // the server answered and closed it
			}
			select {
			case <-stop:
				return
			case <-deadline:
				return
			case <-ticker.C:
			}
		}
	}()
}

// yieldedAnswer waits for the answer of the slow upload that yielded its
// place (429 rate_limited naming it); the others' answers are 429 for
// want of a place, or none while they go on.
// quickUpload posts five bytes for company c's first device, an upload
// that takes no time once it has a place, and fails the test unless it is
// stored (201, its 5 bytes); what names the upload in the failure.
func quickUpload(t *testing.T, srv *httptest.Server, c int, what string) {
	t.Helper()
	res, err := http.Post(srv.URL+fmt.Sprintf("/?c=%d&d=0&key=quick", c), "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || string(body) != "5" {
		t.Fatalf("%s: %d %q, want 201 and its 5 bytes stored", what, res.StatusCode, body)
	}
}

func yieldedAnswer(t *testing.T, answers <-chan slowAnswer, chunkTimeout time.Duration) slowAnswer {
	t.Helper()
	deadline := time.After(poll.Timeout + chunkTimeout)
	for {
		select {
		case a := <-answers:
			if a.status == http.StatusTooManyRequests && strings.Contains(a.body, "gave its place to another company's") {
				return a
			}
			if a.status != http.StatusTooManyRequests {
				t.Fatalf("a slow upload of company %d answered %d %q, want 429 or nothing while it goes on", a.company, a.status, a.body)
			}
		case <-deadline:
			t.Fatal("no slow upload answered that it gave its place to another company's upload")
		}
	}
}
