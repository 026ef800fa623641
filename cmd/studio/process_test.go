package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
)

// These tests run the real binary, several processes at once, where the
// behaviour is about processes: opening, locking and writing one file.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// studioBinary builds the studio once for the package's tests.
func studioBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "studio-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "studio")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func TestProcessesOpenOneNewFileAtOnce(t *testing.T) {
	bin := studioBinary(t)
	const openers = 8
	for round := range 3 {
		path := filepath.Join(t.TempDir(), "new.db")
		var wg sync.WaitGroup
		outs := make([]string, openers)
		errs := make([]error, openers)
		start := make(chan struct{})
		for i := range openers {
			cmd := exec.Command(bin, "sessions", "--db", path)
			wg.Go(func() {
				<-start
				out, err := cmd.CombinedOutput()
				outs[i], errs[i] = string(out), err
			})
		}
		close(start)
		wg.Wait()
		for i := range openers {
			if errs[i] != nil {
				t.Errorf("round %d, opener %d of %d: %v\n%s", round, i, openers, errs[i], outs[i])
			}
		}
		d, err := db.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := d.IntegrityCheck(context.Background()); err != nil || ok != "ok" {
			t.Errorf("round %d: integrity_check = %q, %v", round, ok, err)
		}
		d.Close()
	}
}

// served is a `studio serve` process.
type served struct {
	url    string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	exited chan struct{}
}

// serve starts `studio serve` on a free loopback port, with any more flags
// given, and waits until it says where it listens.
func serve(t testing.TB, dbPath string, flags ...string) *served {
	t.Helper()
	cmd := exec.Command(studioBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0", "--db", dbPath}, flags...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, stderr: &stderr, exited: make(chan struct{})}
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-s.exited
		}
	})
	for line := range lines {
		if u, ok := strings.CutPrefix(line, "Delegation Studio on "); ok {
			s.url = strings.Fields(u)[0]
			return s
		}
	}
	<-s.exited
	t.Fatalf("studio serve stopped before it listened:\n%s", stderr.String())
	return nil
}

// stop sends SIGTERM and waits for the process to end.
func (s *served) stop(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("studio serve did not stop within 20 s of SIGTERM")
	}
}

// startSlow starts, through the API, a session of many slow turns: it runs
// far longer than the tests take, and they stop it themselves.
func (s *served) startSlow(t *testing.T) string {
	t.Helper()
	var turns []string
	for i := range 400 {
		turns = append(turns, fmt.Sprintf(`{"content": "step %d", "delay_ms": 50, "tool_calls": [{"name": "ls", "args": {"path": "/"}}]}`, i))
	}
	doc := `{"name": "slow", "prompt": "go", "agent": {"max_steps": 1000}, "script": {"main": [` + strings.Join(turns, ",") + `, {"content": "done"}]}}`
	resp, err := http.Post(s.url+"/api/sessions", "application/json", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %s, %v", resp.Status, err)
	}
	return out.ID
}

// waitSeq waits until a session's stored log has reached seq n.
func waitSeq(t *testing.T, path, id string, n int64) int64 {
	t.Helper()
	d, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := d.Session(context.Background(), id)
		if err == nil && s.LastSeq >= n {
			return s.LastSeq
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s never reached seq %d (%+v, %v)", id, n, s, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSecondServeIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "studio.db")
	first := serve(t, path)
	id := first.startSlow(t)
	waitSeq(t, path, id, 10)

	out, err := exec.Command(studioBinary(t), "serve", "--addr", "127.0.0.1:0", "--db", path).CombinedOutput()
	if code := exitCode(err); code != exitFailed {
		t.Fatalf("a second serve on the same file exited %d; want %d\n%s", code, exitFailed, out)
	}
	if want := fmt.Sprintf("in use by another studio serve (pid %d)", first.cmd.Process.Pid); !strings.Contains(string(out), want) {
		t.Errorf("a second serve says %q; want it to say the file is %s", out, want)
	}
	// It touched nothing: the first one's session still runs and records.
	at := waitSeq(t, path, id, 0)
	waitSeq(t, path, id, at+5)
	d, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if s, _ := d.Session(context.Background(), id); s.Status != delegation.StatusRunning {
		t.Fatalf("the first server's session is %s after a second serve tried the file; want running", s.Status)
	}
}

func TestImportWhileServing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "studio.db")
	srv := serve(t, path)
	id := srv.startSlow(t)
	waitSeq(t, path, id, 10)

	// A trace to import: the example, run headless.
	trace := filepath.Join(t.TempDir(), "trace.json")
	out, err := exec.Command(studioBinary(t), "run", example, "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trace, out, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		out, err := exec.Command(studioBinary(t), "import", trace, "--db", path).CombinedOutput()
		if err != nil {
			t.Fatalf("import %d into the served file: %v\n%s", i, err, out)
		}
	}
	at := waitSeq(t, path, id, 0)
	waitSeq(t, path, id, at+5) // it records on after the imports
	srv.stop(t)

	d, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, _ := d.Session(context.Background(), id)
	if s.Status != delegation.StatusInterrupted || strings.Contains(s.Error, "store") {
		t.Fatalf("the live session ended %s (%q); want interrupted by the stop, never by the store", s.Status, s.Error)
	}
	events, err := d.EventsAfter(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range events {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the log has a gap", i, ev.Seq)
		}
	}
	if strings.Contains(srv.stderr.String(), "recording stopped") {
		t.Errorf("the server stopped recording:\n%s", srv.stderr.String())
	}
	list, _ := d.Sessions(context.Background(), 0)
	if len(list) != 6 {
		t.Errorf("%d sessions stored; want the live one and 5 imports", len(list))
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
