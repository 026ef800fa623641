package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/delegationstudio/studio/internal/otlp/otlptest"
)

// result is what one run of the studio binary said and how it exited.
type result struct {
	code           int
	stdout, stderr string
}

// runStudio runs the studio binary with args, as cred's user when given.
func runStudio(t *testing.T, cred *syscall.Credential, args ...string) result {
	t.Helper()
	cmd := exec.Command(studioBinary(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// checkReadOnlyCommands: on a database it may not write, the reading
// commands read it as usual; the writing ones refuse, naming why (want)
// and how to write it (fix), and write nothing.
func checkReadOnlyCommands(t *testing.T, cred *syscall.Credential, path, id, want, fix string) {
	t.Helper()
	if r := runStudio(t, cred, "sessions", "--db", path); r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Errorf("sessions = %d\n%s%s\nwant 0, listing %s", r.code, r.stdout, r.stderr, id)
	}
	r := runStudio(t, cred, "sessions", "--json", "--db", path)
	var lines []struct{ ID string }
	if err := json.Unmarshal([]byte(r.stdout), &lines); r.code != 0 || err != nil || len(lines) != 1 || lines[0].ID != id {
		t.Errorf("sessions --json = %d %v\n%s%s\nwant 0, the one session %s", r.code, err, r.stdout, r.stderr, id)
	}
	r = runStudio(t, cred, "export", id, "--db", path)
	var tr struct{ Session struct{ ID string } }
	if err := json.Unmarshal([]byte(r.stdout), &tr); r.code != 0 || err != nil || tr.Session.ID != id {
		t.Errorf("export = %d %v\n%s\nwant 0, the trace of %s", r.code, err, r.stderr, id)
	}
	trace := filepath.Join(t.TempDir(), "trace.json")
	if err := os.WriteFile(trace, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		os.Chmod(filepath.Dir(trace), 0o755)
	}
	for _, args := range [][]string{{"import", trace}, {"run", example}} {
		r := runStudio(t, cred, append(args, "--db", path)...)
		if r.code != exitFailed || !strings.Contains(r.stderr, "is read-only ("+want+"), and this command writes it") || !strings.Contains(r.stderr, fix) {
			t.Errorf("%s = %d\n%s\nwant %d, saying it is read-only (%s) and %q", args[0], r.code, r.stderr, exitFailed, want, fix)
		}
	}
	if r := runStudio(t, cred, "sessions", "--json", "--db", path); !strings.Contains(r.stdout, id) || strings.Count(r.stdout, `"id"`) != 1 {
		t.Errorf("after the refusals the database lists\n%s\nwant only %s", r.stdout, id)
	}
}

func TestReadingCommandsOnAReadOnlyMount(t *testing.T) {
	path, id := readOnlyDir(t)
	checkReadOnlyCommands(t, nil, path, id, "the database is on a read-only file system", "remount it read-write")
}

// TestReadingCommandsOnADeniedFile: a file and folder whose mode forbids
// writing them (to root as well: the commands run as nobody then).
func TestReadingCommandsOnADeniedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "studio.db")
	id := importExample(t, path)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// nobody must reach the binary and the folder to be refused
		// only the writing.
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
		for _, d := range []string{filepath.Dir(studioBinary(t)), filepath.Dir(dir)} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for p, mode := range map[string]os.FileMode{path: 0o444, dir: 0o555} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	checkReadOnlyCommands(t, cred, path, id, "this user may not write the database or its folder", "give --db a writable copy")
}

// TestReadOnlyLeavesALapsedRun: on a read-only mount, `sessions` and
// `export` show a killed run's lapsed session as running, lease lapsed,
// say on stderr why they cannot end it, and leave its log as it was.
func TestReadOnlyLeavesALapsedRun(t *testing.T) {
	src, id := lapsedRun(t)
	path := mountReadOnly(t, src)
	why := "1 session whose process is gone still reads as running: the database is read-only (the database is on a read-only file system)"
	r := runStudio(t, nil, "sessions", "--db", path)
	if line := lineOf(r.stdout, id); r.code != 0 || !strings.Contains(line, "running (lease lapsed ") || !strings.Contains(line, "ago: its process is gone)") {
		t.Errorf("sessions = %d, shows\n%s\nwant it running, its lease lapsed; stderr:\n%s", r.code, line, r.stderr)
	}
	if !strings.Contains(r.stderr, "studio sessions: "+why) {
		t.Errorf("sessions says\n%s\nwant %q", r.stderr, why)
	}
	r = runStudio(t, nil, "export", id, "--db", path)
	if want := "studio export: session " + id + ": running (lease lapsed "; r.code != 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "studio export: "+why) {
		t.Errorf("export = %d, says\n%s\nwant %q and %q", r.code, r.stderr, want, why)
	}
	if n, _ := ends(t, openDB(t, src), id); n != 0 {
		t.Errorf("the log ends %d times; want it left as it was", n)
	}
}

// TestExportPushFromAReadOnlyMount: a push from a read-only database goes,
// and says it is not recorded (nothing may be written): the next one is
// not told it had been pushed before.
func TestExportPushFromAReadOnlyMount(t *testing.T) {
	path, id := readOnlyDir(t)
	r := otlptest.New(t)
	for i := range 2 {
		res := runStudio(t, nil, "export", id, "--otlp-endpoint", r.URL, "--db", path)
		if res.code != 0 || len(r.Requests()) != i+1 || !strings.Contains(res.stdout, "Pushed ") ||
			!strings.Contains(res.stdout, "The push is not recorded: the database is read-only (the database is on a read-only file system).") ||
			strings.Contains(res.stdout, "pushed there before") {
			t.Fatalf("push %d = %d\n%s%s\nwant it pushed, not recorded; %d requests", i+1, res.code, res.stdout, res.stderr, len(r.Requests()))
		}
	}
}
