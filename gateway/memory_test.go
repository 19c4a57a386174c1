package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/poll"
)

// fleetEnv names the hub's URL for the fleet process of BenchmarkIdleLinks;
// the device tokens come on its standard input, one a line.
const fleetEnv = "SIMRELAY_GATEWAY_FLEET_URL"

// BenchmarkIdleLinks reports what one idle phone's link holds in the hub:
// live heap, goroutine stack and goroutines per link, measured in this
// process while the phones (reference clients) run in another, so that
// their own memory is not counted. It links 2,000 phones; run it once:
//
//	go test -run '^$' -bench IdleLinks -benchtime 1x ./gateway/
//
// With IDLE_LINKS_HEAP=file it also writes a heap profile of the idle links,
// every allocation sampled, for go tool pprof -sample_index=inuse_space.
// It reports; it asserts no size.
func BenchmarkIdleLinks(b *testing.B) {
	const phones = 2000
	profile := os.Getenv("IDLE_LINKS_HEAP")
	if profile != "" {
		runtime.MemProfileRate = 1
	}
	r := newRig(b, Config{})
	fps := make([]string, phones)
	for i := range fps {
		fps[i] = fmt.Sprintf("idle-%05d", i)
	}
	tokens, err := r.devices.Provision(context.Background(), r.company, r.admin, fps)
	if err != nil {
		b.Fatal(err)
	}
	before := idleMemory()
	for b.Loop() {
		fleet := exec.Command(os.Args[0], "-test.run=^TestIdleFleet$")
		fleet.Env = append(os.Environ(), fleetEnv+"="+r.url)
		fleet.Stdin = strings.NewReader(strings.Join(tokens, "\n") + "\n")
		fleet.Stderr = os.Stderr
		if err := fleet.Start(); err != nil {
			b.Fatal(err)
		}
		stop := func() { _ = fleet.Process.Kill(); _ = fleet.Wait() }
		b.Cleanup(stop)
		poll.Within(b, 2*time.Minute, "every phone linked", func() bool { return r.hub.Count() == phones })
		// The welcomes' writer goroutines end once their frame is out.
		poll.Until(b, "the welcomes written", func() bool { return runtime.NumGoroutine()-before.goroutines <= phones })
		after := idleMemory()
		if profile != "" {
			writeHeapProfile(b, profile)
		}
		b.ReportMetric(float64(after.heap-before.heap)/phones, "heap-B/link")
		b.ReportMetric(float64(after.stack-before.stack)/phones, "stack-B/link")
		b.ReportMetric(float64(after.goroutines-before.goroutines)/phones, "goroutines/link")
		b.ReportMetric(float64(after.anon-before.anon)/phones, "anon-RSS-B/link")
		stop() // the next round, if any, starts from no links
		poll.Within(b, time.Minute, "every link ended", func() bool { return r.hub.Count() == 0 })
	}
}

func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

type memory struct {
	heap, stack, anon int64
	goroutines        int
}

// idleMemory collects the garbage and reads what is left: heap in use (as
// simrelay bench reads it), stacks, goroutines and anonymous RSS.
func idleMemory() memory {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memory{heap: int64(ms.HeapInuse), stack: int64(ms.StackInuse), goroutines: runtime.NumGoroutine()}
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.SplitSeq(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				m.anon = kb << 10
			}
		}
	}
	return m
}

// TestIdleFleet is the phones' side of BenchmarkIdleLinks, in a process of
// its own: it links one reference-client phone per token read from standard
// input and keeps them until it is killed. Without the benchmark's
// environment it has nothing to do.
func TestIdleFleet(t *testing.T) {
	base := os.Getenv(fleetEnv)
	if base == "" {
		t.Skip("the fleet process of BenchmarkIdleLinks")
	}
	var tokens []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		tokens = append(tokens, sc.Text())
	}
	// Spread over source addresses, as simrelay bench does, so that no one
	// address runs out of ports.
	clients := make([]*http.Client, 50)
	for i := range clients {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}}
		clients[i] = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, token := range tokens {
		p := client.New(client.Config{WSURL: base, Token: token, HTTPClient: clients[i%len(clients)],
			BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second,
			Hello: proto.Hello{AppVersion: "idle", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}}}})
		go func() { _ = p.Run(ctx) }()
		if i%200 == 199 {
			poll.Within(t, time.Minute, "a wave of phones linked", func() bool { return p.Connected() })
		}
	}
	<-ctx.Done() // the benchmark kills this process when it has measured
}
