package db_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

func openDB(t testing.TB) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func loadScenario(t testing.TB, path string) *scenario.Scenario {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

const example = "../../examples/order-number.json"

// anonymous blanks what differs between two runs of the same scenario, or
// an export and its re-import: ids of sessions and times.
func anonymous(t *testing.T, tr *trace.Trace) string {
	t.Helper()
	c := *tr
	c.Session.ID = ""
	c.Session.CreatedAt = time.Time{}
	c.Session.FinishedAt = nil
	c.Events = append([]delegation.Event(nil), tr.Events...)
	for i := range c.Events {
		c.Events[i].At = time.Time{}
		if c.Events[i].Type == delegation.EventSessionStarted {
			var d map[string]any
			_ = json.Unmarshal(c.Events[i].Data, &d)
			d["session_id"] = ""
			c.Events[i].Data, _ = json.Marshal(d)
		}
		c.Events[i].Data = normalizeDurations(c.Events[i].Data)
	}
	c.ModelCalls = append([]trace.ModelCall(nil), tr.ModelCalls...)
	for i := range c.ModelCalls {
		c.ModelCalls[i].DurationMS = 0
		c.ModelCalls[i].StartedAt = time.Time{}
	}
	b, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func normalizeDurations(data json.RawMessage) json.RawMessage {
	var d map[string]any
	if json.Unmarshal(data, &d) != nil {
		return data
	}
	delete(d, "duration_ms") // left out when 0, so present only on slow runs
	b, _ := json.Marshal(d)
	return b
}

func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "studio.db")
	d, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	t.Run("reopening applies nothing twice", func(t *testing.T) {
		d, err := db.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if ok, err := d.IntegrityCheck(context.Background()); err != nil || ok != "ok" {
			t.Fatalf("integrity = %q, %v", ok, err)
		}
	})
	t.Run("a path in a missing directory is a clear error", func(t *testing.T) {
		_, err := db.Open(context.Background(), "/nonexistent/dir/studio.db")
		if err == nil || !strings.Contains(err.Error(), "/nonexistent/dir/studio.db") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestExportEqualsRunJSON(t *testing.T) {
	sc := loadScenario(t, example)
	d := openDB(t)
	r := &session.Runner{DB: d}
	id, res, err := r.Run(context.Background(), sc)
	if err != nil || res.Status != delegation.StatusDone {
		t.Fatalf("run: %v %+v", err, res)
	}
	stored, err := d.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Session.ID != id {
		t.Fatalf("session id = %s, want %s", stored.Session.ID, id)
	}

	// What `studio run --json` prints: the trace built from the events.
	var events []delegation.Event
	_, err = session.Run(context.Background(), sc, session.RunOptions{SessionID: "other",
		Sink: delegation.SinkFunc(func(e delegation.Event) {
			if e.Seq > 0 {
				events = append(events, e)
			}
		})})
	if err != nil {
		t.Fatal(err)
	}
	built, err := trace.Build(trace.Meta{ID: "other", Title: sc.File.Title, Scenario: sc.Raw}, events)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := anonymous(t, stored), anonymous(t, built); a != b {
		t.Fatalf("export differs from run --json:\n%s", firstDiff(a, b))
	}

	t.Run("export, import, export gives the same document but for ids and times", func(t *testing.T) {
		doc, _ := json.Marshal(stored)
		newID, err := r.Import(context.Background(), doc)
		if err != nil {
			t.Fatal(err)
		}
		if newID == id {
			t.Fatal("import kept the old id")
		}
		again, err := d.Trace(context.Background(), newID)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := anonymous(t, stored), anonymous(t, again); a != b {
			t.Fatalf("round trip differs:\n%s", firstDiff(a, b))
		}
	})
	t.Run("the list shows the session with its totals", func(t *testing.T) {
		list, err := d.Sessions(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		var s *db.Session
		for i := range list {
			if list[i].ID == id {
				s = &list[i]
			}
		}
		if s == nil || s.Status != "done" || s.Agents != 2 || s.ModelCalls != 4 || s.InputTokens == 0 || s.LastSeq != int64(len(stored.Events)) {
			t.Fatalf("session = %+v", s)
		}
	})
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  %s\n  %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(al), len(bl))
}

func TestBadImports(t *testing.T) {
	sc := loadScenario(t, example)
	d := openDB(t)
	r := &session.Runner{DB: d}
	id, _, err := r.Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	good, err := d.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	goodJSON, _ := json.Marshal(good)
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(goodJSON, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	cases := []struct {
		name, field, want string
		doc               []byte
	}{
		{"truncated JSON", "", "not valid JSON", goodJSON[:len(goodJSON)/2]},
		{"wrong format", "format", "", edit(func(m map[string]any) { m["format"] = "something.else" })},
		{"wrong version", "version", "version 2", edit(func(m map[string]any) { m["version"] = 2 })},
		{"a duplicate seq", "events[3].seq", "must increase strictly", edit(func(m map[string]any) {
			ev := m["events"].([]any)
			ev[3].(map[string]any)["seq"] = ev[2].(map[string]any)["seq"]
		})},
		{"a message id referred to but missing", "events", "is not in messages", edit(func(m map[string]any) {
			m["messages"] = m["messages"].([]any)[1:]
		})},
		{"a context range past the list", "model_calls[0].context[0]", "outside", edit(func(m map[string]any) {
			c := m["model_calls"].([]any)[0].(map[string]any)["context"].([]any)[0].(map[string]any)
			c["to"] = 99
		})},
	}
	count := func() int {
		list, err := d.Sessions(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	before := count()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.Import(context.Background(), c.doc)
			var e *delegation.Error
			if !errors.As(err, &e) || e.Code != delegation.EINVALID {
				t.Fatalf("err = %v, want an EINVALID error", err)
			}
			var fields []string
			for _, f := range e.Fields {
				fields = append(fields, f.Error())
			}
			joined := strings.Join(fields, "\n")
			if !strings.Contains(joined, c.field) || !strings.Contains(joined, c.want) {
				t.Fatalf("errors = %s; want one at %q saying %q", joined, c.field, c.want)
			}
			if n := count(); n != before {
				t.Fatalf("sessions = %d after a bad import, want %d: something was written", n, before)
			}
		})
	}
	t.Run("a body over the size limit", func(t *testing.T) {
		big := append([]byte(`{"pad":"`), bytes.Repeat([]byte("x"), trace.MaxBytes)...)
		_, err := r.Import(context.Background(), append(big, `"}`...))
		if delegation.ErrorCode(err) != delegation.ETOOLARGE || count() != before {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestRecover(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "studio.db")
	d, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m := newGatedModel()
	r := &session.Runner{DB: d, ModelFor: m.forScenario}
	sc, err := scenario.Parse([]byte(`{"name": "held", "prompt": "go", "script": {"main": [{"content": "unused: the test plays the model"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.Start(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	<-m.blocked // the main agent's second call is under way, and held
	waitRow(t, d, id, func(s *db.Session) bool { return s.ModelCalls == 2 })
	before, err := d.EventsAfter(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}

	// Another process opens the same file, as a second studio would.
	other, err := db.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	t.Run("a session a live process holds is left alone", func(t *testing.T) {
		ids, err := other.Recover(ctx)
		if err != nil || len(ids) != 0 {
			t.Fatalf("recovered %v, %v; want none", ids, err)
		}
		if s, _ := other.Session(ctx, id); s.Status != delegation.StatusRunning || s.Owner != r.Owner() {
			t.Fatalf("status %s owner %q; want running, held by %q", s.Status, s.Owner, r.Owner())
		}
	})
	t.Run("once its lease has run out it ends as interrupted, with the events a live session ends with", func(t *testing.T) {
		other.Clock = func() time.Time { return time.Now().Add(time.Hour) }
		ids, err := other.Recover(ctx)
		if err != nil || len(ids) != 1 || ids[0] != id {
			t.Fatalf("recovered %v, %v; want [%s]", ids, err, id)
		}
		events, err := other.EventsAfter(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range events {
			if ev.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d: the log has a gap", i, ev.Seq)
			}
		}
		added := events[len(before):]
		if got, want := len(added), 2; got != want {
			t.Fatalf("recovery appended %d events, want %d (agent.finished, session.finished)", got, want)
		}
		if added[0].Type != delegation.EventAgentFinished || added[0].AgentID != "main" || added[1].Type != delegation.EventSessionFinished {
			t.Fatalf("recovery appended %s(%s), %s", added[0].Type, added[0].AgentID, added[1].Type)
		}
		tr, err := other.Trace(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Session.Status != delegation.StatusInterrupted || tr.Session.Error != db.ReasonLapsed {
			t.Fatalf("the trace says %s (%q); want interrupted (%q)", tr.Session.Status, tr.Session.Error, db.ReasonLapsed)
		}
		if a := tr.Agents[0]; a.Status != delegation.StatusFailed || a.Error != db.ReasonLapsed {
			t.Fatalf("main is %s (%q) in the trace; want failed, saying why", a.Status, a.Error)
		}
		if ids, _ := other.Recover(ctx); len(ids) != 0 {
			t.Fatalf("a second recovery ended %v again", ids)
		}
	})
	t.Run("the process whose lease lapsed writes nothing after the end", func(t *testing.T) {
		last, _ := other.Session(ctx, id)
		close(m.release)
		r.Wait()
		s, _ := other.Session(ctx, id)
		if s.LastSeq != last.LastSeq || s.Status != delegation.StatusInterrupted {
			t.Fatalf("after the old process went on: last_seq %d → %d, status %s", last.LastSeq, s.LastSeq, s.Status)
		}
	})
}

// gatedModel plays a main agent that lists the root, holds its second call
// until released, lists again and answers: a session "in the middle", made
// to happen rather than waited for.
type gatedModel struct {
	calls   atomic.Int32
	blocked chan struct{} // closed when the second call starts
	release chan struct{} // close to let it answer
	third   chan struct{} // closed when the third call starts: the second's events are out
}

func newGatedModel() *gatedModel {
	return &gatedModel{blocked: make(chan struct{}), release: make(chan struct{}), third: make(chan struct{})}
}

func (m *gatedModel) forScenario(*scenario.Scenario) (delegation.Model, error) { return m, nil }

func (m *gatedModel) Generate(ctx context.Context, req *delegation.Request) (*delegation.Response, error) {
	ls := &delegation.Response{ToolCalls: []delegation.ToolCall{{Name: "ls", Args: json.RawMessage(`{"path": "/"}`)}}}
	switch m.calls.Add(1) {
	case 1:
		return ls, nil
	case 2:
		close(m.blocked)
		select {
		case <-m.release:
			return ls, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case 3:
		close(m.third)
	}
	return &delegation.Response{Content: "done"}, nil
}

// waitRow waits until a session's stored row satisfies ok.
func waitRow(t *testing.T, d *db.DB, id string, ok func(*db.Session) bool) *db.Session {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := d.Session(context.Background(), id)
		if err == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: the awaited row never came (last: %+v, %v)", id, s, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKilledMidSession runs a session in a child process, kills it with
// SIGKILL while it runs, and reopens the file.
func TestKilledMidSession(t *testing.T) {
	if os.Getenv("STUDIO_CRASH_CHILD") != "" {
		crashChild()
		return
	}
	path := filepath.Join(t.TempDir(), "studio.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledMidSession$")
	cmd.Env = append(os.Environ(), "STUDIO_CRASH_CHILD=1", "STUDIO_CRASH_DB="+path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	// Wait until the child has committed part of the session, then kill it.
	deadline := time.Now().Add(20 * time.Second)
	var d *db.DB
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the child never got going:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
		if d == nil {
			if _, err := os.Stat(path); err != nil {
				continue
			}
			var err error
			if d, err = db.Open(context.Background(), path); err != nil {
				continue
			}
		}
		list, err := d.Sessions(context.Background(), 0)
		if err == nil && len(list) == 1 && list[0].LastSeq >= 20 {
			break
		}
	}
	d.Close()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	d, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if ok, err := d.IntegrityCheck(context.Background()); err != nil || ok != "ok" {
		t.Fatalf("integrity_check = %q, %v", ok, err)
	}
	list, _ := d.Sessions(context.Background(), 0)
	if len(list) != 1 || list[0].Status != delegation.StatusRunning {
		t.Fatalf("before recovery: %+v", list)
	}
	id := list[0].ID
	events, err := d.EventsAfter(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) < 20 || int64(len(events)) != list[0].LastSeq {
		t.Fatalf("%d events, last_seq %d", len(events), list[0].LastSeq)
	}
	for i, ev := range events {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the log has a gap", i, ev.Seq)
		}
	}
	r := &session.Runner{DB: d}
	if n, err := r.Recover(context.Background()); err != nil || n != 0 {
		t.Fatalf("recovered %d, %v, while the killed process's lease still runs; want 0", n, err)
	}
	d.Clock = func() time.Time { return time.Now().Add(session.DefaultLease + time.Second) }
	if n, err := r.Recover(context.Background()); err != nil || n != 1 {
		t.Fatalf("recovered %d, %v, once the lease ran out; want 1", n, err)
	}
	s, _ := d.Session(context.Background(), id)
	if s.Status != delegation.StatusInterrupted {
		t.Fatalf("status = %s, want interrupted", s.Status)
	}
	// What was committed still exports, as an interrupted session, ended
	// by the events recovery appended.
	tr, err := d.Trace(context.Background(), id)
	if err != nil || tr.Session.Status != delegation.StatusInterrupted || len(tr.Events) != len(events)+2 {
		t.Fatalf("export: %v %+v, %d events after %d", err, tr.Session, len(tr.Events), len(events))
	}
}

// crashChild runs a slow session into STUDIO_CRASH_DB until it is killed.
func crashChild() {
	d, err := db.Open(context.Background(), os.Getenv("STUDIO_CRASH_DB"))
	if err != nil {
		panic(err)
	}
	var turns []string
	for i := 0; i < 500; i++ {
		turns = append(turns, fmt.Sprintf(`{"content": "step %d", "delay_ms": 20, "tool_calls": [{"name": "ls", "args": {"path": "/"}}]}`, i))
	}
	doc := fmt.Sprintf(`{"name": "slow", "prompt": "go", "agent": {"max_steps": 600}, "script": {"main": [%s, {"content": "done"}]}}`, strings.Join(turns, ","))
	sc, err := scenario.Parse([]byte(doc))
	if err != nil {
		panic(err)
	}
	r := &session.Runner{DB: d}
	_, _, _ = r.Run(context.Background(), sc)
}

func TestCostsAndCachedPrefixesAreStored(t *testing.T) {
	doc, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(doc, &m)
	m["pricing"] = map[string]any{"input": 2.5, "cached_input": 1.25, "output": 10}
	doc, _ = json.Marshal(m)
	sc, err := scenario.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	d := openDB(t)
	r := &session.Runner{DB: d}
	id, _, err := r.Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := d.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	cached := 0
	for _, c := range stored.ModelCalls {
		if c.Cost == nil || c.Cost.Total <= 0 || c.Cost.Basis != delegation.BasisEstimate {
			t.Fatalf("call %s cost = %+v", c.ID, c.Cost)
		}
		cached += c.CachedPrefixTokens
	}
	if cached == 0 {
		t.Fatal("no call has a cached prefix")
	}
	for _, a := range stored.Agents {
		if a.Price == nil || a.Price.Input != 2.5 || a.Price.Source != "scenario" {
			t.Fatalf("agent %s price = %+v", a.ID, a.Price)
		}
	}
	doc, _ = json.Marshal(stored)
	newID, err := r.Import(context.Background(), doc)
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.Trace(context.Background(), newID)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := anonymous(t, stored), anonymous(t, again); a != b {
		t.Fatalf("round trip differs:\n%s", firstDiff(a, b))
	}
}
