package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The benchmarks' viewers run in a process of their own, as a browser
// would, so that the server's CPU figures are the server's alone: the test
// binary re-runs itself with STUDIO_VIEWER_URL set.
func TestMain(m *testing.M) {
	if url := os.Getenv("STUDIO_VIEWER_URL"); url != "" {
		n, _ := strconv.Atoi(os.Getenv("STUDIO_VIEWER_N"))
		os.Exit(runViewers(url, max(n, 1)))
	}
	os.Exit(m.Run())
}

// viewerReport is what the viewer process prints when every viewer has seen
// session.finished.
type viewerReport struct {
	Bytes    int64   `json:"bytes"`    // websocket payload bytes, all viewers
	Messages int64   `json:"messages"` // websocket messages, all viewers
	Largest  int     `json:"largest"`  // the largest message
	Events   int64   `json:"events"`   // events timed (after every viewer was connected)
	P50MS    float64 `json:"p50_ms"`   // event time → received, in ms
	P99MS    float64 `json:"p99_ms"`
	MaxMS    float64 `json:"max_ms"`
	Err      string  `json:"err,omitempty"`
	CPUMS    float64 `json:"-"` // the viewer process's CPU time
}

// runViewers connects n websocket viewers to url, says "ready" once all are
// connected, reads every message until each has seen session.finished, and
// prints a viewerReport.
func runViewers(url string, n int) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var rep viewerReport
	var lat []int64
	var wg sync.WaitGroup
	// Each viewer reads from the moment it is connected, as a browser
	// does: a viewer that waited for the others would find the first
	// events behind what it had not read yet, and time its own backlog.
	var ready atomic.Int64 // when the last viewer connected; events before it are not timed
	ready.Store(1 << 62)
	read := func(c *websocket.Conn) {
		var mine []int64
		var b, msgs int64
		largest := 0
		var buf bytes.Buffer
		defer func() {
			mu.Lock()
			rep.Bytes += b
			rep.Messages += msgs
			rep.Largest = max(rep.Largest, largest)
			lat = append(lat, mine...)
			mu.Unlock()
		}()
		for {
			// Background, as a browser reads: a context that can end would
			// cost each read a callback registered and removed, which this
			// process, sharing the cores with the server it measures, pays
			// 500 times a message. The deadline closes the sockets instead.
			_, r, err := c.Reader(context.Background())
			if err != nil {
				mu.Lock()
				rep.Err = err.Error()
				mu.Unlock()
				return
			}
			buf.Reset()
			if _, err := buf.ReadFrom(r); err != nil {
				return
			}
			now := time.Now().UnixNano()
			data := buf.Bytes()
			b += int64(len(data))
			msgs++
			largest = max(largest, len(data))
			finished := false
			// A message holds one event, or several, one JSON value a
			// line. Only each line's head is read (seq, type, at come
			// first), so that this process keeps up with the server
			// whose latency it measures.
			for line := range bytes.SplitSeq(data, []byte("\n")) {
				seq, typ, at, ok := lineHead(line)
				if !ok {
					continue
				}
				if seq > 0 && at > ready.Load() {
					mine = append(mine, now-at)
				}
				finished = finished || typ == "session.finished"
			}
			if finished {
				c.Close(websocket.StatusNormalClosure, "")
				return
			}
		}
	}
	for range n {
		var c *websocket.Conn
		var err error
		for try := 0; ; try++ {
			c, _, err = websocket.Dial(ctx, url, nil)
			if err == nil || try > 2000 {
				break
			}
			time.Sleep(5 * time.Millisecond) // the session is being created
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "dial:", err)
			return 1
		}
		c.SetReadLimit(1 << 30)
		stop := context.AfterFunc(ctx, func() { _ = c.CloseNow() })
		wg.Go(func() { defer stop(); read(c) })
	}
	ready.Store(time.Now().UnixNano())
	fmt.Println("ready")
	wg.Wait()
	slices.Sort(lat)
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	if len(lat) > 0 {
		rep.Events = int64(len(lat))
		rep.P50MS, rep.P99MS, rep.MaxMS = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
	}
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
	return 0
}

// lineHead reads the seq, type and time at the head of a live message's
// line: {"seq":N,"type":"…","agent_id":…,"at":"RFC 3339",…}.
func lineHead(line []byte) (seq int64, typ string, at int64, ok bool) {
	head := line[:min(len(line), 200)]
	field := func(name string) []byte {
		_, rest, found := bytes.Cut(head, []byte(`"`+name+`":`))
		if !found {
			return nil
		}
		end := bytes.IndexAny(rest, ",}")
		if end < 0 {
			return nil
		}
		return bytes.Trim(rest[:end], `"`)
	}
	seq, err := strconv.ParseInt(string(field("seq")), 10, 64)
	if err != nil {
		return 0, "", 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(field("at")))
	if err != nil {
		return 0, "", 0, false
	}
	return seq, string(field("type")), t.UnixNano(), true
}

// viewerProcess is a running viewer process.
type viewerProcess struct {
	cmd   *exec.Cmd
	out   *bufio.Scanner
	ready chan struct{}
	done  chan viewerReport
}

// startViewers starts n viewers of a websocket URL in another process and
// waits until they are connected.
func startViewers(tb testing.TB, url string, n int) *viewerProcess {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STUDIO_VIEWER_URL="+url, "STUDIO_VIEWER_N="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	v := &viewerProcess{cmd: cmd, out: bufio.NewScanner(stdout), ready: make(chan struct{}), done: make(chan viewerReport, 1)}
	v.out.Buffer(make([]byte, 1<<20), 1<<20)
	go func() {
		var rep viewerReport
		for v.out.Scan() {
			line := v.out.Text()
			if line == "ready" {
				close(v.ready)
				continue
			}
			if strings.HasPrefix(line, "{") {
				_ = json.Unmarshal([]byte(line), &rep)
			}
		}
		_ = cmd.Wait()
		if st := cmd.ProcessState; st != nil {
			rep.CPUMS = float64((st.UserTime() + st.SystemTime()).Milliseconds())
		}
		v.done <- rep
	}()
	select {
	case <-v.ready:
	case rep := <-v.done:
		tb.Fatalf("the viewer process ended before connecting: %+v", rep)
	case <-time.After(2 * time.Minute):
		tb.Fatal("the viewers did not connect within 2 minutes")
	}
	return v
}

// wait returns the viewers' report once every viewer saw the session end.
func (v *viewerProcess) wait(tb testing.TB) viewerReport {
	tb.Helper()
	select {
	case rep := <-v.done:
		if rep.Err != "" && rep.Events == 0 && rep.Bytes == 0 {
			tb.Fatalf("viewers: %s", rep.Err)
		}
		return rep
	case <-time.After(5 * time.Minute):
		_ = v.cmd.Process.Kill()
		tb.Fatal("the viewers did not see the session end within 5 minutes")
	}
	return viewerReport{}
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
