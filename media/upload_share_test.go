package media

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
)

// Four companies whose agents each send their uploads as slowly as the
// server lets them (each 256 KiB within UploadChunkTimeout: at the
// default two minutes, 16 MiB takes two hours) hold at most half the server's arriving
// places and one more each: the other half are kept for companies with
// none arriving, one a company, so another company's upload is stored at
// once. When four companies could
// hold all sixteen (4 each), every other company's upload waited a minute
// and was refused with 429, for as long as the slow ones lasted.
func TestSlowCompaniesLeaveArrivingPlacesToOthers(t *testing.T) {
	t.Parallel()
	const companies, each = 4, DefaultUploadsPerCompany
	chunkTimeout := 3 * time.Second
	s, devs := companiesService(t, Config{ChunkTimeout: chunkTimeout, UploadChunkTimeout: chunkTimeout}, companies+1, each, each, each, 1)
	srv, _ := uploadServer(t, s, devs)

	// Each slow upload declares 16 MiB and sends 64 KiB each eighth of
	// ChunkTimeout (256 KiB each half of it: twice the server's floor)
	// until the test ends or the server answers.
	stop := make(chan struct{})
	answers := make(chan int, companies*each)
	for c := range companies {
		for d := range each {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /?c=%d&d=%d&key=slow-%d-%d HTTP/1.1\r\nHost: x\r\nContent-Type: video/mp4\r\nContent-Length: %d\r\n\r\n",
				c, d, c, d, DefaultMaxBytes)
			go func() {
				_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
				res, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					answers <- 0
					return
				}
				res.Body.Close()
				answers <- res.StatusCode
			}()
			go func() {
				part := bytes.Repeat([]byte{'v'}, 64<<10)
				tick := time.NewTicker(chunkTimeout / 8)
				defer tick.Stop()
				for range DefaultMaxBytes / len(part) {
					if _, err := conn.Write(part); err != nil {
						return // the server answered and closed it
					}
					select {
					case <-stop:
						return
					case <-tick.C:
					}
				}
			}()
		}
	}
	defer close(stop)
	underWay := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for _, k := range s.active {
			n += k
		}
		return n
	}
	poll.Until(t, "every slow upload under way, arriving or waiting for a place", func() bool { return underWay() == companies*each })

	// Another company's upload, over real HTTP as an agent's.
	other := devs[companies][0]
	res, err := http.Post(srv.URL+fmt.Sprintf("/?c=%d&d=0&key=quick", companies), "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || string(body) != "5" {
		t.Fatalf("an upload of company %d while %d companies send %d slow uploads each: %d %q, want 201 and its 5 bytes stored",
			other.CompanyID, companies, each, res.StatusCode, body)
	}

	// The slow companies hold the shared places and one kept place each
	// at most; their uploads beyond that are refused once they waited
	// ChunkTimeout for a place.
	s.mu.Lock()
	held := len(s.spools)
	s.mu.Unlock()
	if most := DefaultSpools - DefaultSpoolsKept + companies; held > most {
		t.Fatalf("arriving places the slow companies hold: %d, want at most %d", held, most)
	}
	deadline := time.After(poll.Timeout + chunkTimeout)
	for refused := 0; refused < companies*each-held; {
		select {
		case status := <-answers:
			if status != http.StatusTooManyRequests {
				t.Fatalf("a slow upload beyond the slow companies' share: %d, want 429", status)
			}
			refused++
		case <-deadline:
			t.Fatalf("%d of the slow uploads that found no place refused, want all %d", refused, companies*each-held)
		}
	}
}
