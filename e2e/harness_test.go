package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's Chromium, which `make chromium` installs.
const chromiumPath = "/usr/bin/chromium"

// artifactsDir receives the screenshots; CI keeps it, git ignores it.
const artifactsDir = "artifacts"

// waitLimit bounds every wait of the tests.
// It is long: every wait is on something the page shows, so a passing test
// never waits it out, and a loaded machine (two cores, several builds) can
// take many seconds for what takes milliseconds alone.
const waitLimit = 60 * time.Second

var (
	// studioBin is the studio binary TestMain built.
	studioBin string
	// browserCtx holds the one Chromium of this run; each test opens a
	// browser context of its own in it.
	browserCtx context.Context
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	if _, err := os.Stat(chromiumPath); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the browser tests need Chromium at %s (%v): run `make chromium` (`make test` installs it first)\n", chromiumPath, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "studio-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(artifactsDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	// The folder shows this run's screenshots only.
	if old, err := filepath.Glob(filepath.Join(artifactsDir, "*.png")); err == nil {
		for _, f := range old {
			_ = os.Remove(f)
		}
	}

	studioBin = filepath.Join(tmp, "studio")
	build := exec.Command(goTool(), "build", "-o", studioBin, "./cmd/studio")
	build.Dir = ".." // the module root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: go build ./cmd/studio: %v\n%s", err, out)
		return 1
	}

	profile := filepath.Join(tmp, "chromium-profile")
	// Exactly these flags (chromedp adds only --remote-debugging-pipe, its
	// way to talk to the browser, and the first page, about:blank).
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(bctx) }()
	select {
	case err := <-started:
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: start Chromium (%s): %v\n", chromiumPath, err)
			return 1
		}
	case <-time.After(30 * time.Second):
		fmt.Fprintf(os.Stderr, "FAIL: Chromium (%s) did not start within 30 s\n", chromiumPath)
		return 1
	}
	browserCtx = bctx
	return m.Run()
}

// goTool is the go command: `go test` puts its own GOROOT/bin first in
// the PATH of the tests it runs.
func goTool() string { return "go" }

// syncBuffer collects a process's stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// studio is one running `studio serve`.
type studio struct {
	URL    string
	stderr *syncBuffer
	pid    int
}

// startStudio runs the studio on a free port with a fresh database and
// stops it (SIGTERM, then wait) when the test ends.
func startStudio(t *testing.T, extra ...string) *studio {
	t.Helper()
	return startStudioEnv(t, nil, extra...)
}

// startStudioEnv is startStudio with more environment variables (KEY=VALUE).
func startStudioEnv(t *testing.T, env []string, extra ...string) *studio {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	args := []string{"serve", "--addr", addr}
	if !slices.Contains(extra, "--db") { // a database of its own, unless the test shares one
		args = append(args, "--db", filepath.Join(t.TempDir(), "studio.db"))
	}
	cmd := exec.Command(studioBin, append(args, extra...)...)
	for _, kv := range os.Environ() {
		// No token, no model endpoint, no other database: this studio is
		// the test's own.
		if k, _, _ := strings.Cut(kv, "="); k == "STUDIO_TOKEN" || k == "STUDIO_DB" || strings.HasPrefix(k, "OPENAI_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, env...)
	s := &studio{URL: "http://" + addr, stderr: &syncBuffer{}}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.pid = cmd.Process.Pid
	exited := make(chan struct{})
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "Delegation Studio on http://") {
				select {
				case listening <- line:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			if waitErr != nil {
				t.Errorf("studio serve did not stop cleanly on SIGTERM: %v", waitErr)
			}
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("studio serve did not stop within 15 s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("studio stderr:\n%s", s.stderr.String())
		}
	})

	select {
	case line := <-listening:
		if !strings.Contains(line, addr) {
			t.Fatalf("studio says %q; want it on %s", line, addr)
		}
	case <-exited:
		t.Fatalf("studio serve exited before listening: %v\n%s", waitErr, s.stderr.String())
	case <-time.After(waitLimit):
		t.Fatalf("studio serve did not say it listens within %v\n%s", waitLimit, s.stderr.String())
	}
	// It answers.
	deadline := time.Now().Add(waitLimit)
	for {
		resp, err := http.Get(s.URL + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			err = fmt.Errorf("GET / = %s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("studio does not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// waitMetric waits until a figure of the studio's /metrics reaches want.
func (s *studio) waitMetric(t *testing.T, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	last := ""
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.URL + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, line := range strings.Split(string(body), "\n") {
				if v, ok := strings.CutPrefix(line, name+" "); ok {
					last = v
					var got float64
					if _, err := fmt.Sscan(v, &got); err == nil && got >= want {
						return
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not reach %v within %s; last %q", name, want, waitLimit, last)
}

// start posts a scenario to the JSON API and returns the session id.
func (s *studio) start(t *testing.T, scenario string) string {
	t.Helper()
	if !json.Valid([]byte(scenario)) {
		t.Fatalf("the test's scenario is not JSON:\n%s", scenario)
	}
	resp, err := http.Post(s.URL+"/api/sessions", "application/json", strings.NewReader(scenario))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %s: %s", resp.Status, body)
	}
	var out struct{ ID, URL string }
	if err := json.Unmarshal(body, &out); err != nil || out.ID == "" || out.URL != "/sessions/"+out.ID {
		t.Fatalf("POST /api/sessions answered %s (%v); want {id, url: /sessions/<id>}", body, err)
	}
	return out.ID
}

// apiTrace is the part of an exported trace the tests read.
type apiTrace struct {
	Session struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"session"`
	Agents []struct {
		ID   string  `json:"id"`
		Name string  `json:"name"`
		Mode *string `json:"mode"`
	} `json:"agents"`
	ModelCalls []struct {
		ID      string `json:"id"`
		AgentID string `json:"agent_id"`
		Index   int    `json:"index"`
	} `json:"model_calls"`
}

func (s *studio) trace(t *testing.T, id string) apiTrace {
	t.Helper()
	resp, err := http.Get(s.URL + "/api/sessions/" + id + "/trace")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET trace = %s: %s", resp.Status, body)
	}
	var tr apiTrace
	if err := json.Unmarshal(body, &tr); err != nil {
		t.Fatalf("the trace: %v", err)
	}
	return tr
}

// waitDone waits, through the API, until a session is no longer running.
func (s *studio) waitDone(t *testing.T, id string) apiTrace {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		tr := s.trace(t, id)
		if tr.Session.Status != "running" {
			if tr.Session.Status != "done" {
				t.Fatalf("session %s ended %q; want done", id, tr.Session.Status)
			}
			return tr
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s still running after %v", id, waitLimit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tab is one test's browser: a fresh browser context (its own cookies and
// storage) with one page.
type tab struct {
	t   *testing.T
	ctx context.Context
}

func newTab(t *testing.T) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tb := &tab{t: t, ctx: ctx}
	// The first action opens the page; it must run on the context itself,
	// not on one with a deadline, which would close the page with it.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("open a page: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			tb.screenshot("failed")
		}
	})
	return tb
}

// do runs actions with a bounded wait.
func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, waitLimit)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

func (tb *tab) navigate(url string) {
	tb.t.Helper()
	tb.do("open "+url, chromedp.Navigate(url))
}

// eval evaluates a JavaScript expression in the page (with
// chromedp.EvalAwaitPromise, an async one's result).
func eval[T any](tb *tab, expr string, opts ...chromedp.EvaluateOption) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, waitLimit)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate every 25 ms, from Go so that it
// survives a navigation, until it holds; at the limit it fails the test
// with what it waited for and the page's state (describe, a JavaScript
// expression giving a string).
func (tb *tab) waitFor(what, predicate, describe string) {
	tb.t.Helper()
	if err := tb.poll(predicate, waitLimit); err != nil {
		got := "?"
		ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
		if s, err := chromedp.Run(ctx, chromedp.Evaluate[string](describe)); err == nil {
			got = s
		}
		cancel()
		tb.t.Fatalf("waiting until %s: %v; the page shows: %s", what, err, got)
	}
}

// poll reports whether a predicate came true within limit, on a page the
// browser has parsed whole: after a click that navigates, the new page's
// first elements exist while its later ones are still arriving, and a
// predicate about the first would let the test read the rest too soon.
func (tb *tab) poll(predicate string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(tb.ctx, limit)
	defer cancel()
	expr := "!!(function(){ try { return document.readyState !== 'loading' && (" + predicate + "); } catch (e) { return false; } })()"
	var lastErr error
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return nil
		}
		if err != nil {
			lastErr = err // a navigation in progress: try again
		}
		select {
		case <-ctx.Done():
			if lastErr != nil && !errors.Is(lastErr, context.DeadlineExceeded) {
				return fmt.Errorf("not within %v (last error: %v)", limit, lastErr)
			}
			return fmt.Errorf("not within %v", limit)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// screenshot saves the whole page as artifacts/<test>-<name>.png.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, waitLimit)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Logf("screenshot %s: %v", name, err)
		return
	}
	file := filepath.Join(artifactsDir, unsafeName.ReplaceAllString(tb.t.Name()+"-"+name, "_")+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		tb.t.Logf("screenshot %s: %v", name, err)
	}
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
