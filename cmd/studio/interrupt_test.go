package main

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
)

// slowHelper is a scenario whose child thinks for a minute on its second
// turn: long enough to be stopped by hand.
const slowHelper = `{"name": "slow", "prompt": "go",
 "subagents": [{"name": "helper", "description": "Helps."}],
 "script": {
  "main": [{"tool_calls": [{"name": "task", "args": {"description": "Think slowly.", "subagent_type": "helper"}}]}, {"content": "done"}],
  "helper": [[{"content": "first", "tool_calls": [{"name": "ls", "args": {"path": "/"}}]}, {"content": "never", "delay_ms": 60000}]]}}`

// TestCtrlC: Ctrl-C stops a run, with or without --db: the session ends as
// interrupted (and is stored so), the tree so far is printed, saying why in
// words (never the Go error, "context canceled"), and the exit code is 130.
func TestCtrlC(t *testing.T) {
	scen := writeFile(t, slowHelper)
	for _, withDB := range []bool{false, true} {
		name := "without --db"
		if withDB {
			name = "with --db"
		}
		t.Run(name, func(t *testing.T) {
			args := []string{"run", scen, "--verbose"}
			dbPath := filepath.Join(t.TempDir(), "studio.db")
			if withDB {
				args = append(args, "--db", dbPath)
			}
			cmd := exec.Command(studioBinary(t), args...)
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until the child is in its long turn: its first call is
			// done, as the progress lines say.
			lines := bufio.NewScanner(stderr)
			var seen []string
			for lines.Scan() {
				seen = append(seen, lines.Text())
				if strings.Contains(lines.Text(), "helper · call 1 · ") {
					break
				}
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				for lines.Scan() {
					seen = append(seen, lines.Text())
				}
				done <- cmd.Wait()
			}()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("the run did not stop after Ctrl-C; stderr:\n%s", strings.Join(seen, "\n"))
			}
			if code := exitCode(err); code != exitInterrupted {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, strings.Join(seen, "\n"))
			}
			out := stdout.String()
			if !strings.HasPrefix(out, "session slow: interrupted · 2 agents") || !strings.Contains(out, "└─ helper [isolated]") {
				t.Fatalf("the tree so far:\n%s", out)
			}
			const why = "its process was stopped (Ctrl-C or SIGTERM)"
			said := strings.Join(seen, "\n")
			if !strings.Contains(out, "main  interrupted: "+why) || !strings.Contains(out, "helper [isolated]  interrupted: "+why) ||
				!strings.Contains(out, "\nstopped: "+why) || !strings.Contains(said, "main interrupted after 1 step: "+why) ||
				strings.Contains(out+said, "context canceled") {
				t.Fatalf("the run does not say why it stopped; tree:\n%s\nstderr:\n%s", out, said)
			}
			if !withDB {
				return
			}
			d, err := db.Open(context.Background(), dbPath)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			list, err := d.Sessions(context.Background(), 0)
			if err != nil || len(list) != 1 || list[0].Status != delegation.StatusInterrupted {
				t.Fatalf("stored: %+v %v", list, err)
			}
		})
	}
}
