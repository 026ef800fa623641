package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
)

// lapsedRun runs `studio run --db` on a scenario that waits, with a lease
// of a second, kills it with SIGKILL while its child thinks, and waits
// until the store shows its lease lapsed. It returns the file and the
// session's id.
func lapsedRun(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "studio.db")
	cmd := exec.Command(studioBinary(t), "run", writeFile(t, slowHelper), "--db", path, "--verbose", "--lease", "1s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "helper · call 1 · ") {
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, stderr)
	_ = cmd.Wait()
	d := openDB(t, path)
	list, err := d.Sessions(context.Background(), 0)
	if err != nil || len(list) != 1 || list[0].Status != delegation.StatusRunning {
		t.Fatalf("after the kill the store holds %+v, %v; want one running session", list, err)
	}
	id := list[0].ID
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := d.Session(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if s.Lapsed(d.Now()) {
			return path, id
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed run's lease never lapsed: it runs until %v", s.LeaseUntil)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func openDB(t *testing.T, path string) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// ends counts the session.finished events of a session's log, and says
// what the last one says.
func ends(t *testing.T, d *db.DB, id string) (int, delegation.SessionFinished) {
	t.Helper()
	events, err := d.EventsAfter(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, last := 0, delegation.SessionFinished{}
	for _, ev := range events {
		if ev.Type == delegation.EventSessionFinished {
			n++
			if err := json.Unmarshal(ev.Data, &last); err != nil {
				t.Fatal(err)
			}
		}
	}
	return n, last
}

// TestReadingCommandsEndALapsedRun: a `run --db` killed with SIGKILL leaves
// its session running; once its lease lapsed, and with no server on the
// file, `sessions` and `export` say so and end it as interrupted, once,
// through the log as serve does.
func TestReadingCommandsEndALapsedRun(t *testing.T) {
	t.Run("sessions", func(t *testing.T) {
		path, id := lapsedRun(t)
		out, err := exec.Command(studioBinary(t), "sessions", "--db", path).CombinedOutput()
		if err != nil {
			t.Fatalf("sessions: %v\n%s", err, out)
		}
		t.Logf("studio sessions:\n%s", out)
		line := lineOf(string(out), id)
		if !strings.Contains(line, "interrupted (ended now: its lease lapsed ") || !strings.Contains(line, "ago, its process is gone)") {
			t.Fatalf("sessions shows the killed run's session as\n%s\nwant it ended now, its lease lapsed; all:\n%s", line, out)
		}
		d := openDB(t, path)
		n, end := ends(t, d, id)
		if n != 1 || end.Status != delegation.StatusInterrupted || end.Error != db.ReasonLapsed {
			t.Fatalf("the log ends %d times, the last %+v; want once, interrupted, %q", n, end, db.ReasonLapsed)
		}
		out, err = exec.Command(studioBinary(t), "sessions", "--db", path).CombinedOutput()
		if err != nil {
			t.Fatalf("second sessions: %v\n%s", err, out)
		}
		if line := lineOf(string(out), id); !strings.Contains(line, " interrupted ") || strings.Contains(line, "lapsed") {
			t.Fatalf("a second sessions shows\n%s\nwant it plainly interrupted", line)
		}
		if n, _ := ends(t, d, id); n != 1 {
			t.Fatalf("after a second sessions the log ends %d times; want once", n)
		}
	})
	t.Run("a server holds the file", func(t *testing.T) {
		path, id := lapsedRun(t)
		lock, err := db.LockServe(path) // the lock a studio serve holds
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Release()
		cmd := exec.Command(studioBinary(t), "sessions", "--db", path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sessions: %v\n%s", err, stderr.String())
		}
		if line := lineOf(string(out), id); !strings.Contains(line, "running (lease lapsed ") || !strings.Contains(line, "ago: its process is gone)") {
			t.Fatalf("sessions shows\n%s\nwant it running, its lease lapsed", line)
		}
		if want := "1 session whose process is gone still reads as running: a studio serve holds the file"; !strings.Contains(stderr.String(), want) {
			t.Fatalf("sessions says\n%s\nwant %q", stderr.String(), want)
		}
		if n, _ := ends(t, openDB(t, path), id); n != 0 {
			t.Fatalf("the log ends %d times; want it left to the server", n)
		}
	})
	t.Run("export", func(t *testing.T) {
		path, id := lapsedRun(t)
		cmd := exec.Command(studioBinary(t), "export", id, "--db", path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("export: %v\n%s", err, stderr.String())
		}
		if want := "studio export: session " + id + ": interrupted (ended now: its lease lapsed "; !strings.Contains(stderr.String(), want) {
			t.Fatalf("export says\n%s\nwant %q", stderr.String(), want)
		}
		var tr struct {
			Session struct{ Status, Error string }
		}
		if err := json.Unmarshal(out, &tr); err != nil || tr.Session.Status != delegation.StatusInterrupted || tr.Session.Error != db.ReasonLapsed {
			t.Fatalf("the exported trace's session is %+v (%v); want interrupted, %q", tr.Session, err, db.ReasonLapsed)
		}
		if n, _ := ends(t, openDB(t, path), id); n != 1 {
			t.Fatalf("the log ends %d times; want once", n)
		}
	})
}

// lineOf is the line of out that holds s.
func lineOf(out, s string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// TestRunWhoseLeaseLapsed: a `run --db` suspended (SIGSTOP) past its lease,
// whose session another process ended meanwhile, says so once continued
// and exits 3, not as a Ctrl-C.
func TestRunWhoseLeaseLapsed(t *testing.T) {
	var turns []string
	for i := range 400 {
		turns = append(turns, fmt.Sprintf(`{"content": "step %d", "delay_ms": 50, "tool_calls": [{"name": "ls", "args": {"path": "/"}}]}`, i))
	}
	scen := writeFile(t, `{"name": "steady", "prompt": "go", "agent": {"max_steps": 1000}, "script": {"main": [`+strings.Join(turns, ",")+`, {"content": "done"}]}}`)
	path := filepath.Join(t.TempDir(), "studio.db")
	cmd := exec.Command(studioBinary(t), "run", scen, "--db", path, "--verbose", "--lease", "1s")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "main · call 3 · ") {
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	d := openDB(t, path)
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := d.Sessions(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 && list[0].Lapsed(d.Now()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the suspended run's lease never lapsed: %+v", list)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := exec.Command(studioBinary(t), "sessions", "--db", path).CombinedOutput(); err != nil || !strings.Contains(string(out), "ended now") {
		t.Fatalf("sessions did not end the lapsed session: %v\n%s", err, out)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var rest []string
	done := make(chan error, 1)
	go func() {
		for lines.Scan() {
			rest = append(rest, lines.Text())
		}
		done <- cmd.Wait()
	}()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the continued run did not stop")
	}
	said := strings.Join(rest, "\n")
	if code := exitCode(err); code != exitLeaseLapsed {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitLeaseLapsed, said)
	}
	if !strings.Contains(said, "studio run: the lease on the session lapsed: this process was suspended or starved") || strings.Contains(said, "stopped:") {
		t.Fatalf("the run says:\n%s", said)
	}
	if n, end := ends(t, d, openList(t, d)); n != 1 || end.Error != db.ReasonLapsed || end.StoppedBy != delegation.StopLapsed {
		t.Fatalf("the log ends %d times, last %+v; want once, by the recovery", n, end)
	}
	// The tree, read back from the store, says why in words.
	const why = "interrupted: its process stopped renewing its lease (it was killed, crashed or suspended), so another process ended it"
	if tree := stdout.String(); !strings.Contains(tree, "main  "+why) || strings.Contains(tree, "context canceled") {
		t.Fatalf("the tree:\n%s", tree)
	}
}

func openList(t *testing.T, d *db.DB) string {
	t.Helper()
	list, err := d.Sessions(context.Background(), 0)
	if err != nil || len(list) != 1 {
		t.Fatalf("%+v, %v", list, err)
	}
	return list[0].ID
}
