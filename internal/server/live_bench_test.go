package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/delegationstudio/studio/internal/benchdata"
	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
)

// The live page's figures (issue 12), each a ratio measured in one run:
// these machines are shared, and absolute figures move with load.

// stepsScenario is benchdata's turns scenario: n tool-call turns, each
// thinking delayMS first, the first firstMS so that viewers connect before
// anything happens.
func stepsScenario(tb testing.TB, n, delayMS, firstMS int) *scenario.Scenario {
	tb.Helper()
	sc, err := scenario.Parse(benchdata.TurnsScenario(n, delayMS, firstMS))
	if err != nil {
		tb.Fatal(err)
	}
	return sc
}

// benchServer is a studio on a real port with a fresh database.
type benchServer struct {
	srv *Server
	ts  *httptest.Server
	db  *db.DB
	n   int
}

func newBenchServer(b *testing.B) *benchServer {
	b.Helper()
	d, err := db.Open(context.Background(), filepath.Join(b.TempDir(), "studio.db"))
	if err != nil {
		b.Fatal(err)
	}
	// Room for the 500 viewers of one session the figures ask for.
	srv := New(Config{DB: d, Limits: Limits{MaxViewers: 1000, MaxSessionViewers: 1000}})
	bs := &benchServer{srv: srv, ts: httptest.NewServer(srv.Handler()), db: d}
	srv.runner.NewID = func() string { bs.n++; return fmt.Sprintf("bench-%d", bs.n) }
	b.Cleanup(func() {
		srv.Shutdown(context.Background())
		bs.ts.Close()
		d.Close()
	})
	return bs
}

// liveURL is a session's websocket as the session page opens it.
func (bs *benchServer) liveURL(id string, after int64) string {
	return "ws" + strings.TrimPrefix(bs.ts.URL, "http") + "/api/sessions/" + id + "/live?view=1&after=" + fmt.Sprint(after)
}

// run runs a scenario watched by `viewers` viewers in another process (none
// when 0); it returns this process's CPU time from the start to the end of
// the session, and what the viewers saw.
func (bs *benchServer) run(b *testing.B, sc *scenario.Scenario, viewers int) (time.Duration, viewerReport) {
	b.Helper()
	id := fmt.Sprintf("bench-%d", bs.n+1)
	before := cpuTime()
	if _, err := bs.srv.runner.Start(context.Background(), sc); err != nil {
		b.Fatal(err)
	}
	var rep viewerReport
	if viewers > 0 {
		v := startViewers(b, bs.liveURL(id, 0), viewers)
		rep = v.wait(b)
	}
	bs.srv.runner.Wait()
	cpu := cpuTime() - before
	sess, err := bs.db.Session(context.Background(), id)
	if err != nil || sess.Status != delegation.StatusDone {
		b.Fatalf("session %s: %v %+v", id, err, sess)
	}
	return cpu, rep
}

// BenchmarkLiveCPU: the server's CPU per model call with one viewer watching
// a 4,000-step session, against a 500-step one (target ≤ 1.3) and against
// the same session with no viewer (target ≤ 2).
func BenchmarkLiveCPU(b *testing.B) {
	bs := newBenchServer(b)
	per := func(steps, viewers int) float64 {
		cpu, _ := bs.run(b, stepsScenario(b, steps, 1, 300), viewers)
		return float64(cpu.Microseconds()) / float64(steps+3)
	}
	for b.Loop() {
		small := per(500, 1)
		large := per(4000, 1)
		alone := per(4000, 0)
		b.ReportMetric(small, "µs/call-500")
		b.ReportMetric(large, "µs/call-4000")
		b.ReportMetric(alone, "µs/call-4000-unwatched")
		b.ReportMetric(large/small, "x4000/500")
		b.ReportMetric(large/alone, "watched/unwatched")
	}
}

// BenchmarkViewerBytes: what a viewer receives over a 2,000-turn session,
// against a 250-turn one. Target: ≤ 10 (linear: 8 times the turns).
func BenchmarkViewerBytes(b *testing.B) {
	bs := newBenchServer(b)
	for b.Loop() {
		_, small := bs.run(b, stepsScenario(b, 250, 1, 300), 1)
		_, large := bs.run(b, stepsScenario(b, 2000, 1, 300), 1)
		b.ReportMetric(float64(small.Bytes), "bytes-250")
		b.ReportMetric(float64(large.Bytes), "bytes-2000")
		b.ReportMetric(float64(large.Largest), "largest-message")
		b.ReportMetric(float64(large.Bytes)/float64(small.Bytes), "x2000/250")
	}
}

// BenchmarkEventToBrowser: from the engine's event to a viewer in another
// process (engine → SQLite → patch → websocket), p99 with 100 viewers
// (target ≤ 10 ms) and with 500 (target ≤ 50 ms).
func BenchmarkEventToBrowser(b *testing.B) {
	bs := newBenchServer(b)
	for b.Loop() {
		for _, n := range viewerCounts() {
			cpu, rep := bs.run(b, stepsScenario(b, 150, 10, 2000), n)
			b.ReportMetric(float64(cpu.Milliseconds()), fmt.Sprintf("server-cpu-ms-%d", n))
			b.ReportMetric(float64(rep.Bytes)/float64(n), fmt.Sprintf("bytes-per-viewer-%d", n))
			b.ReportMetric(rep.P50MS, fmt.Sprintf("p50-ms-%d", n))
			b.ReportMetric(rep.P99MS, fmt.Sprintf("p99-ms-%d", n))
			b.ReportMetric(float64(rep.Events), fmt.Sprintf("deliveries-%d", n))
			b.ReportMetric(rep.CPUMS, fmt.Sprintf("viewer-cpu-ms-%d", n))
			b.ReportMetric(float64(rep.Messages)/float64(n), fmt.Sprintf("messages-per-viewer-%d", n))
		}
	}
}

func viewerCounts() []int {
	if v := os.Getenv("STUDIO_BENCH_VIEWERS"); v != "" {
		n, _ := strconv.Atoi(v)
		return []int{n}
	}
	return []int{100, 500}
}

// timeGet is the time to the last byte of a GET, and the body's size.
func timeGet(b *testing.B, url string) (time.Duration, int) {
	b.Helper()
	start := time.Now()
	res, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		b.Fatalf("GET %s: %s", url, res.Status)
	}
	return time.Since(start), int(n)
}

// timeReconnect is the time from dialling a session's websocket with
// after=last-1 to its first message: what a reconnect costs the server.
func timeReconnect(b *testing.B, url string) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 30)
	if _, _, err := c.Read(ctx); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkSessionPages: the session page of 100,000 messages against one of
// 1,000, server time to the last byte (target ≤ 3), its HTML (≤ 1.5 MB), and
// at 100,000 messages a message fragment, a scrubber step and a reconnect
// (each ≤ 5 ms for the first two).
func BenchmarkSessionPages(b *testing.B) {
	bs := newBenchServer(b)
	small := bigSession(b, bs.db, bs.srv, 1_000)
	large := bigSession(b, bs.db, bs.srv, 100_000)
	sess, err := bs.db.Session(context.Background(), large)
	if err != nil {
		b.Fatal(err)
	}
	page := func(id string) string { return bs.ts.URL + "/sessions/" + id }
	for b.Loop() {
		var ps, pl, frag, scrub, rec []time.Duration
		var size int
		for range 5 {
			d, _ := timeGet(b, page(small))
			ps = append(ps, d)
			d, size = timeGet(b, page(large))
			pl = append(pl, d)
			d, _ = timeGet(b, page(large)+"/messages/main.50001?fragment=1")
			frag = append(frag, d)
			d, _ = timeGet(b, page(large)+fmt.Sprintf("/scrub?step=%d", sess.ModelCalls/2))
			scrub = append(scrub, d)
			rec = append(rec, timeReconnect(b, bs.liveURL(large, sess.LastSeq-1)))
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(median(ps)), "ms-page-1k")
		b.ReportMetric(ms(median(pl)), "ms-page-100k")
		b.ReportMetric(float64(median(pl))/float64(median(ps)), "x100k/1k")
		b.ReportMetric(float64(size), "html-bytes-100k")
		b.ReportMetric(ms(median(frag)), "ms-fragment-100k")
		b.ReportMetric(ms(median(scrub)), "ms-scrub-100k")
		b.ReportMetric(ms(median(rec)), "ms-reconnect-100k")
	}
}
