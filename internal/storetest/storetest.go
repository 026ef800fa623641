// Package storetest is the suite every store of the studio passes, the
// store as a parameter: SQLite's and PostgreSQL's (internal/db) run it
// (storetest_test.go), and so would any other. It stands above the server,
// so that it tests the one interface the studio has of a store
// (server.server.Store) and makes its logs by running the lessons. It checks what the runner and the server rely on:
// appends and their seq rules, one transaction a batch, leases and
// recovery, imports, reads (the export's cursors, the page's rows, the live
// stream's pages), the sessions list, page states, teams, OTLP push marks,
// counts. Each test gets a new, empty store from open.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/server"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// Run runs the suite; open returns a new, empty store, closed when the
// test ends.
func Run(t *testing.T, open func(t *testing.T) server.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, server.Store)
	}{
		{"appended logs read back as the trace the log builds", testAppends},
		{"seq follows the log's last, and only a running log grows", testSeqRules},
		{"a batch is one transaction", testBatchIsAtomic},
		{"recovery ends sessions whose lease ran out, by appending their ends", testRecovery},
		{"export, import, export gives the same trace but for the id", testImports},
		{"an import that fails writes nothing", testBadImport},
		{"a read is one moment of a session that goes on", testSnapshot},
		{"the export's cursors", testCursors},
		{"the live stream's pages", testEventsPage},
		{"the page's rows", testPageRows},
		{"files: versions, growth, deletes, what came back", testFiles},
		{"any text is kept as given, a NUL too", testAnyText},
		{"the sessions list reads summaries, newest first", testSessions},
		{"the sessions list picks by status and origin", testSessionsWhere},
		{"page states", testViews},
		{"teams", testTeams},
		{"runs: sessions started together, and what a team was cloned from", testRuns},
		{"what was pushed where", testPushes},
		{"counts", testCounts},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

var ctx = context.Background()

// lessonTraces are logs of every kind the engine and the receiver make: a
// delegation each way, fan-out, a fork that inherits a summary (history
// files), todos, refusals, files that come back and are lost, structured
// answers, a received deepagents run, priced agents whose calls have
// cached prefixes and costs.
var lessonTraces = []string{"order-number", "summarized-fork", "fan-out", "files-and-todos", "nested-delegation",
	"lost-update--delta", "lost-update--snapshot", "review-loop", "failure-isolation--ours", "received-deepagents",
	"cache-and-cost--fork-own-tools"}

var (
	tracesMu sync.Mutex
	traces   = map[string]*trace.Trace{}
)

// lessonTrace runs a lesson's variant ("lesson" or "lesson--variant") and
// returns its trace: without the delays its script has for those who
// watch, and once per process. Callers must not change it.
func lessonTrace(t *testing.T, name string) *trace.Trace {
	t.Helper()
	tracesMu.Lock()
	defer tracesMu.Unlock()
	if tr := traces[name]; tr != nil {
		return tr
	}
	lesson, variant, found := strings.Cut(name, "--")
	if !found {
		variant = lesson
	}
	l, err := lessons.Get(lesson)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := l.Variant(variant)
	if !ok {
		t.Fatalf("lesson %s has no variant %s", lesson, variant)
	}
	var tr *trace.Trace
	if v.Recorded != nil {
		if tr, err = v.Run(ctx); err != nil {
			t.Fatalf("run %s: %v", name, err)
		}
	} else {
		var doc any
		if err := json.Unmarshal(v.Scenario, &doc); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(undelayed(doc))
		sc, err := scenario.Parse(raw)
		if err != nil {
			t.Fatalf("scenario of %s: %v", name, err)
		}
		var mu sync.Mutex
		var events []delegation.Event
		id := "run-" + name
		if _, err := session.Run(ctx, sc, session.RunOptions{SessionID: id, Sink: delegation.SinkFunc(func(e delegation.Event) {
			if e.Seq > 0 {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
		})}); err != nil {
			t.Fatalf("run %s: %v", name, err)
		}
		if tr, err = trace.Build(trace.Meta{ID: id, Title: sc.File.Title, Scenario: sc.Raw}, events); err != nil {
			t.Fatal(err)
		}
	}
	traces[name] = tr
	return tr
}

// undelayed is a scenario without delay_ms anywhere.
func undelayed(v any) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "delay_ms")
		for k, e := range x {
			x[k] = undelayed(e)
		}
	case []any:
		for i, e := range x {
			x[i] = undelayed(e)
		}
	}
	return v
}

// store stores a trace's log as a live session would be: its row, then its
// events in batches of the given size, as the engine emits them.
func store(t *testing.T, s server.Store, id string, tr *trace.Trace, batch int) {
	t.Helper()
	events, err := trace.Inflate(tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(ctx, &db.Session{ID: id, Name: tr.Session.Name, Title: tr.Session.Title, Prompt: tr.Session.Prompt,
		Tokenizer: tr.Session.Tokenizer, Scenario: tr.Scenario, CreatedAt: tr.Session.CreatedAt,
		Owner: "storetest", LeaseUntil: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < len(events); lo += batch {
		if err := s.AppendEvents(ctx, id, events[lo:min(lo+batch, len(events))]); err != nil {
			t.Fatalf("append events %d…: %v", lo+1, err)
		}
	}
}

// same fails unless two traces are the same document, but for the
// session's id.
func same(t *testing.T, what string, got, want *trace.Trace) {
	t.Helper()
	g, w := *got, *want
	g.Session.ID, w.Session.ID = "", ""
	gj, _ := json.MarshalIndent(g, "", " ")
	wj, _ := json.MarshalIndent(w, "", " ")
	if string(gj) != string(wj) {
		t.Fatalf("%s differs:\n%s", what, firstDiff(string(gj), string(wj)))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			from := max(i-3, 0)
			return fmt.Sprintf("line %d:\n got: %s\nwant: %s\n(context: %s)", i+1, al[i], bl[i], strings.Join(al[from:i], " | "))
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(al), len(bl))
}

func code(err error) string { return delegation.ErrorCode(err) }

func testAppends(t *testing.T, s server.Store) {
	for i, name := range lessonTraces {
		t.Run(name, func(t *testing.T) {
			tr := lessonTrace(t, name)
			id := fmt.Sprintf("append-%d", i)
			// Batches of one, of a few, and all at once: the log does not
			// depend on where a batch ended.
			store(t, s, id, tr, []int{1, 7, 4096}[i%3])
			got, err := s.Trace(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			same(t, "the stored trace", got, tr)
			if strings.HasPrefix(name, "cache-and-cost") && !priced(got) {
				t.Fatal("the priced lesson's stored trace has no agent price, call cost or cached prefix")
			}
			row, err := s.Session(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			calls, tokens := 0, 0
			for _, c := range tr.ModelCalls {
				calls++
				tokens += c.InputTokens
			}
			if row.LastSeq != int64(len(tr.Events)) || row.Agents != len(tr.Agents) || row.ModelCalls != calls ||
				row.InputTokens != tokens || row.Status != tr.Session.Status {
				t.Fatalf("row = %+v; want last seq %d, %d agents, %d calls, %d tokens, %s", row, len(tr.Events), len(tr.Agents),
					calls, tokens, tr.Session.Status)
			}
		})
	}
}

// priced reports whether a trace has what a priced session stores beyond
// tokens: an agent's price, a call's cost and a cached prefix.
func priced(tr *trace.Trace) bool {
	var price, cost, cached bool
	for _, a := range tr.Agents {
		price = price || a.Price != nil
	}
	for _, c := range tr.ModelCalls {
		cost, cached = cost || c.Cost != nil, cached || c.CachedPrefixTokens > 0
	}
	return price && cost && cached
}

// begin stores a session that has started: session.started, the main
// agent's agent.started, its prompt.
func begin(t *testing.T, s server.Store, id string, lease time.Time) []delegation.Event {
	t.Helper()
	at := time.Now().UTC()
	if err := s.CreateSession(ctx, &db.Session{ID: id, Name: "n", Prompt: "go", CreatedAt: at, Owner: "o", LeaseUntil: lease}); err != nil {
		t.Fatal(err)
	}
	events := []delegation.Event{
		{Seq: 1, Type: delegation.EventSessionStarted, At: at, Payload: delegation.SessionStarted{SessionID: id, Name: "n",
			Prompt: "go", Tokenizer: "o200k_base", Files: map[string]string{"/a.md": "A"}}},
		{Seq: 2, Type: delegation.EventAgentStarted, AgentID: "main", At: at, Payload: delegation.AgentStarted{
			Agent: delegation.AgentInfo{ID: "main", Name: "main"}, Tools: []delegation.ToolCost{{Name: "ls", Tokens: 5}}}},
		{Seq: 3, Type: delegation.EventMessageAdded, AgentID: "main", At: at, Payload: delegation.MessageAdded{Index: 0,
			Message: &delegation.Message{ID: "main.0", AgentID: "main", Role: delegation.RoleUser, Content: "go", Tokens: 1, Kind: delegation.KindPrompt}}},
	}
	if err := s.AppendEvents(ctx, id, events); err != nil {
		t.Fatal(err)
	}
	return events
}

func event(seq int64, typ delegation.EventType, agent string, payload any) delegation.Event {
	return delegation.Event{Seq: seq, Type: typ, AgentID: agent, At: time.Now().UTC(), Payload: payload}
}

func testSeqRules(t *testing.T, s server.Store) {
	begin(t, s, "s", time.Now().Add(time.Hour))
	delta := func(seq int64) delegation.Event {
		return event(seq, delegation.EventDelegationRefused, "main", delegation.DelegationRefused{ToolCallID: "c", Reason: "nested"})
	}
	for _, c := range []struct {
		name string
		seq  int64
	}{{"a gap", 5}, {"a seq again", 3}, {"a seq before", 1}} {
		t.Run(c.name, func(t *testing.T) {
			err := s.AppendEvents(ctx, "s", []delegation.Event{delta(c.seq)})
			if code(err) != delegation.ECONFLICT {
				t.Fatalf("append seq %d after 3: %v, want ECONFLICT", c.seq, err)
			}
		})
	}
	t.Run("live-only events are not stored", func(t *testing.T) {
		live := event(0, delegation.EventModelDelta, "main", delegation.ModelDelta{ModelCallID: "x", Text: "hi"})
		if err := s.AppendEvents(ctx, "s", []delegation.Event{live, delta(4)}); err != nil {
			t.Fatal(err)
		}
		if row, _ := s.Session(ctx, "s"); row.LastSeq != 4 {
			t.Fatalf("last seq %d, want 4", row.LastSeq)
		}
	})
	t.Run("an ended session's log takes no more", func(t *testing.T) {
		end := event(5, delegation.EventSessionFinished, "", delegation.SessionFinished{Status: delegation.StatusDone})
		if err := s.AppendEvents(ctx, "s", []delegation.Event{end}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvents(ctx, "s", []delegation.Event{delta(6)}); code(err) != delegation.ECONFLICT {
			t.Fatalf("append after the end: %v, want ECONFLICT", err)
		}
	})
	t.Run("an unknown session", func(t *testing.T) {
		if err := s.AppendEvents(ctx, "nope", []delegation.Event{delta(1)}); code(err) != delegation.ENOTFOUND {
			t.Fatalf("append to no session: %v, want ENOTFOUND", err)
		}
	})
}

func testBatchIsAtomic(t *testing.T, s server.Store) {
	begin(t, s, "s", time.Now().Add(time.Hour))
	before, err := s.Trace(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	bad := []delegation.Event{
		event(4, delegation.EventMessageAdded, "main", delegation.MessageAdded{Index: 1, Message: &delegation.Message{ID: "main.1",
			AgentID: "main", Role: delegation.RoleAssistant, Content: "written, then undone", Tokens: 3}}),
		event(5, delegation.EventFilesChanged, "main", delegation.FilesChanged{Changes: []delegation.FileChange{{Path: "/b.md", Content: "B"}}}),
		event(7, delegation.EventAgentFinished, "main", delegation.AgentFinished{Status: delegation.StatusDone}),
	}
	if err := s.AppendEvents(ctx, "s", bad); err == nil {
		t.Fatal("a batch with a gap was taken")
	}
	after, err := s.Trace(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "the session after a failed batch", after, before)
}

func testRecovery(t *testing.T, s server.Store) {
	expired := time.Now().Add(-time.Minute)
	begin(t, s, "lapsed", expired)
	child := []delegation.Event{
		event(4, delegation.EventDelegationStarted, "main", delegation.DelegationStarted{ToolCallID: "t1", ChildID: "a1", SubagentType: "w"}),
		event(5, delegation.EventAgentStarted, "a1", delegation.AgentStarted{Agent: delegation.AgentInfo{ID: "a1", Name: "w",
			ParentID: "main", TaskCallID: "t1"}}),
		event(6, delegation.EventModelStarted, "a1", delegation.ModelStarted{Call: delegation.ModelCall{ID: "a1.c0", AgentID: "a1",
			Purpose: delegation.PurposeTurn, Context: []delegation.Range{}}}),
	}
	if err := s.AppendEvents(ctx, "lapsed", child); err != nil {
		t.Fatal(err)
	}
	begin(t, s, "held", time.Now().Add(time.Hour))
	begin(t, s, "renewed", expired)
	if err := s.RenewLeases(ctx, "o", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Only "lapsed" is still expired: the renewal was of every running
	// session of owner "o", so make it lapse again.
	begin(t, s, "lapsed-too", expired)

	ids, err := s.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "lapsed-too" {
		t.Fatalf("recovered %v; want [lapsed-too]: the others' leases run", ids)
	}
	t.Run("its end is in its log: children first, then the session", func(t *testing.T) {
		ended, err := s.Trace(ctx, "lapsed-too")
		if err != nil {
			t.Fatal(err)
		}
		n := len(ended.Events)
		if n != 5 || ended.Events[3].Type != delegation.EventAgentFinished || ended.Events[4].Type != delegation.EventSessionFinished {
			t.Fatalf("events after recovery: %+v", ended.Events)
		}
		if ended.Session.Status != delegation.StatusInterrupted || ended.Agents[0].Status != delegation.StatusFailed {
			t.Fatalf("after recovery: session %s, main %s", ended.Session.Status, ended.Agents[0].Status)
		}
		if ids, _ := s.Recover(ctx); len(ids) != 0 {
			t.Fatalf("a second recovery ended %v", ids)
		}
	})
	t.Run("finish ends a running session the same way, its children first", func(t *testing.T) {
		ok, err := s.FinishOpen(ctx, "lapsed", delegation.StatusFailed, "", "the store failed")
		if err != nil || !ok {
			t.Fatalf("finish: %v, %v", ok, err)
		}
		tr, err := s.Trace(ctx, "lapsed")
		if err != nil {
			t.Fatal(err)
		}
		evs := tr.Events[len(tr.Events)-3:]
		if evs[0].Type != delegation.EventAgentFinished || evs[0].AgentID != "a1" || evs[1].AgentID != "main" ||
			evs[2].Type != delegation.EventSessionFinished {
			t.Fatalf("closing events: %+v", evs)
		}
		var d delegation.SessionFinished
		_ = json.Unmarshal(evs[2].Data, &d)
		if d.Status != delegation.StatusFailed || d.Error != "the store failed" || tr.Session.Status != delegation.StatusFailed {
			t.Fatalf("the end says %+v, the session %s", d, tr.Session.Status)
		}
		for _, a := range tr.Agents {
			if a.Status != delegation.StatusFailed {
				t.Fatalf("agent %s is %s", a.ID, a.Status)
			}
		}
		if ok, err := s.FinishOpen(ctx, "lapsed", delegation.StatusFailed, "", "again"); err != nil || ok {
			t.Fatalf("finishing an ended session: %v, %v", ok, err)
		}
	})
}

func testImports(t *testing.T, s server.Store) {
	for i, name := range lessonTraces {
		t.Run(name, func(t *testing.T) {
			tr := lessonTrace(t, name)
			id := fmt.Sprintf("import-%d", i)
			if err := s.Import(ctx, id, tr); err != nil {
				t.Fatal(err)
			}
			got, err := s.Trace(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			same(t, "the imported trace", got, tr)
		})
	}
	t.Run("ids of other programs and data in other forms", func(t *testing.T) {
		tr := foreign(t, lessonTrace(t, "order-number"))
		if err := s.Import(ctx, "foreign", tr); err != nil {
			t.Fatal(err)
		}
		got, err := s.Trace(ctx, "foreign")
		if err != nil {
			t.Fatal(err)
		}
		same(t, "the imported trace", got, tr)
		rd, err := s.ReadPage(ctx, "foreign")
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		m, err := rd.MessageByID(ctx, tr.Messages[2].ID)
		if err != nil || m == nil || m.Content != tr.Messages[2].Content {
			t.Fatalf("message %s by id: %+v, %v", tr.Messages[2].ID, m, err)
		}
		c, err := rd.Call(ctx, tr.ModelCalls[1].ID)
		if err != nil || c == nil || c.ID != tr.ModelCalls[1].ID || c.OutputMessageID == nil || *c.OutputMessageID != *tr.ModelCalls[1].OutputMessageID {
			t.Fatalf("call %s by id: %+v, %v", tr.ModelCalls[1].ID, c, err)
		}
	})
	t.Run("a log that never ended keeps the trace's statuses", func(t *testing.T) {
		tr := lessonTrace(t, "order-number")
		cut := *tr
		cut.Events = tr.Events[:len(tr.Events)-1] // no session.finished
		cut.Session.Status = delegation.StatusInterrupted
		if err := s.Import(ctx, "cut", &cut); err != nil {
			t.Fatal(err)
		}
		got, err := s.Session(ctx, "cut")
		if err != nil || got.Status != delegation.StatusInterrupted {
			t.Fatalf("status %+v, %v", got, err)
		}
	})
}

// foreign renames a trace's messages and calls as another program would
// name them, and gives some events data in forms the engine does not write.
func foreign(t *testing.T, tr *trace.Trace) *trace.Trace {
	t.Helper()
	b, _ := json.Marshal(tr)
	doc := string(b)
	for i, m := range tr.Messages {
		doc = strings.ReplaceAll(doc, `"`+m.ID+`"`, fmt.Sprintf(`"msg_%03d_x"`, i))
	}
	for i, c := range tr.ModelCalls {
		doc = strings.ReplaceAll(doc, `"`+c.ID+`"`, fmt.Sprintf(`"call-%d"`, i))
	}
	var out trace.Trace
	if err := json.Unmarshal([]byte(doc), &out); err != nil {
		t.Fatal(err)
	}
	for i, ev := range out.Events {
		switch ev.Type {
		case delegation.EventToolStarted, delegation.EventToolFinished, delegation.EventFilesChanged:
			// Fields in another order, and one of its own.
			var m map[string]any
			_ = json.Unmarshal(ev.Data, &m)
			m["zz_extra"] = "kept"
			out.Events[i].Data, _ = json.Marshal(m)
		}
	}
	return &out
}

func testBadImport(t *testing.T, s server.Store) {
	tr := lessonTrace(t, "order-number")
	bad := *tr
	bad.Events = append([]trace.Event(nil), tr.Events...)
	for i, ev := range bad.Events {
		if ev.Type == delegation.EventModelFinished {
			bad.Events[i].Data = trace.ModelCallData("no-such-call")
			break
		}
	}
	if err := s.Import(ctx, "bad", &bad); err == nil {
		t.Fatal("a trace whose model.finished names no call was imported")
	}
	if _, err := s.Session(ctx, "bad"); code(err) != delegation.ENOTFOUND {
		t.Fatalf("after a failed import: %v, want no session", err)
	}
	if list, _ := s.Sessions(ctx, 0); len(list) != 0 {
		t.Fatalf("after a failed import: %d sessions", len(list))
	}
}

func testSnapshot(t *testing.T, s server.Store) {
	begin(t, s, "s", time.Now().Add(time.Hour))
	err := s.Read(ctx, "s", func(r db.Reader) error {
		// The session goes on while it is read.
		more := []delegation.Event{event(4, delegation.EventDelegationRefused, "main", delegation.DelegationRefused{ToolCallID: "c", Reason: "nested"})}
		if err := s.AppendEvents(ctx, "s", more); err != nil {
			return err
		}
		n := 0
		for _, err := range r.Events() {
			if err != nil {
				return err
			}
			n++
		}
		if n != 3 || r.Head().LastSeq != 3 {
			return fmt.Errorf("the read saw %d events (last seq %d); want the 3 it began with", n, r.Head().LastSeq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Read(ctx, "nope", func(db.Reader) error { return nil }); code(err) != delegation.ENOTFOUND {
		t.Fatalf("read of no session: %v", err)
	}
}

func testCursors(t *testing.T, s server.Store) {
	tr := lessonTrace(t, "summarized-fork")
	store(t, s, "s", tr, 64)
	err := s.Read(ctx, "s", func(r db.Reader) error {
		h := r.Head()
		if h.LastSeq != int64(len(tr.Events)) || h.Session.Name != tr.Session.Name || string(h.Scenario) != string(tr.Scenario) ||
			r.Session().ID != "s" {
			return fmt.Errorf("head %+v", h.Session)
		}
		var buf strings.Builder
		if err := trace.Write(&buf, r, false); err != nil {
			return err
		}
		var written trace.Trace
		if err := json.Unmarshal([]byte(buf.String()), &written); err != nil {
			return err
		}
		same(t, "the streamed trace", &written, tr)
		// The log with what each event introduced, as the trace's own
		// source reads it.
		var got, want []trace.Step
		for st, err := range r.Log() {
			if err != nil {
				return err
			}
			got = append(got, st)
		}
		for st, err := range trace.SourceOf(tr).Log() {
			if err != nil {
				return err
			}
			want = append(want, st)
		}
		if len(got) != len(want) {
			return fmt.Errorf("log of %d steps, want %d", len(got), len(want))
		}
		for i := range got {
			g, _ := json.Marshal(stepView(got[i]))
			w, _ := json.Marshal(stepView(want[i]))
			if string(g) != string(w) {
				return fmt.Errorf("step %d:\n got %s\nwant %s", i+1, g, w)
			}
		}
		// An agent's list, newest first.
		var back []string
		for m, err := range r.Backward("main", 1, 4) {
			if err != nil {
				return err
			}
			back = append(back, m.ID)
		}
		if strings.Join(back, ",") != "main.3,main.2,main.1" {
			return fmt.Errorf("backward: %v", back)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stepView is what a step says, for comparing steps.
func stepView(st trace.Step) any {
	ev := st.Event
	ev.Payload = nil
	c := st.Call
	if c != nil {
		cc := *c
		cc.StartedAt = time.Time{} // a call's start is its event's
		c = &cc
	}
	return struct {
		Event    delegation.Event
		Index    int
		Message  *trace.Message
		Call     *trace.ModelCall
		Finished *delegation.ModelFinished
		Decoded  any
	}{ev, st.Index, st.Message, c, st.Finished, []any{st.AgentStarted, st.AgentFinished, st.ToolStarted, st.ToolFinished,
		st.DelegationStarted, st.DelegationFinished, st.DelegationRefused, st.Summarization, st.FilesChanged, st.TodosChanged,
		st.SessionStarted, st.SessionFinished}}
}

func testEventsPage(t *testing.T, s server.Store) {
	tr := lessonTrace(t, "fan-out")
	store(t, s, "s", tr, 10)
	var all []db.LoggedEvent
	for after := int64(0); ; {
		page, err := s.EventsPage(ctx, "s", after, 17)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 17 {
			t.Fatalf("a page of %d events, at most 17 asked", len(page))
		}
		all = append(all, page...)
		after = page[len(page)-1].Seq
	}
	if len(all) != len(tr.Events) {
		t.Fatalf("%d events in pages, the log has %d", len(all), len(tr.Events))
	}
	msgs, calls := map[string]trace.Message{}, map[string]trace.ModelCall{}
	for _, m := range tr.Messages {
		msgs[m.ID] = m
	}
	for _, c := range tr.ModelCalls {
		calls[c.ID] = c
	}
	for i, ev := range all {
		want := tr.Events[i]
		if ev.Seq != want.Seq || ev.Type != want.Type || ev.AgentID != want.AgentID || !ev.At.Equal(want.At) || string(ev.Data) != string(want.Data) {
			t.Fatalf("event %d: %+v, want %+v", i+1, ev.Event, want)
		}
		var ref trace.Ref
		_ = json.Unmarshal(ev.Data, &ref)
		switch ev.Type {
		case delegation.EventMessageAdded:
			if ev.Message == nil || ev.Message.Content != msgs[ref.MessageID].Content {
				t.Fatalf("event %d: message %+v", ev.Seq, ev.Message)
			}
		case delegation.EventModelStarted:
			if ev.Call == nil || ev.Call.InputTokens != calls[ref.ModelCallID].InputTokens {
				t.Fatalf("event %d: call %+v", ev.Seq, ev.Call)
			}
		}
	}
}

func testPageRows(t *testing.T, s server.Store) {
	tr := lessonTrace(t, "fan-out")
	store(t, s, "s", tr, 5)
	rd, err := s.ReadPage(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if rd.Session().ID != "s" || rd.Session().LastSeq != int64(len(tr.Events)) {
		t.Fatalf("session %+v", rd.Session())
	}
	lists := trace.Lists(tr)
	main := lists["main"]
	t.Run("messages by place and by id", func(t *testing.T) {
		got, err := rd.Messages(ctx, "main", 1, 4)
		if err != nil || len(got) != 3 || got[0].ID != main[1].ID || got[2].Index != 3 || got[1].Content != main[2].Content {
			t.Fatalf("messages 1…4: %+v, %v", got, err)
		}
		if m, err := rd.MessageAt(ctx, "main", len(main)); err != nil || m != nil {
			t.Fatalf("past the end: %+v, %v", m, err)
		}
		m, err := rd.MessageByID(ctx, main[2].ID)
		if err != nil || m == nil || m.Index != 2 {
			t.Fatalf("by id: %+v, %v", m, err)
		}
	})
	t.Run("model calls by step, by id, by agent", func(t *testing.T) {
		n := len(tr.ModelCalls)
		head, err := rd.CallsHead(ctx, 2)
		if err != nil || len(head) != 2 || head[0].ID != tr.ModelCalls[0].ID || head[1].Step != 2 {
			t.Fatalf("head: %+v, %v", head, err)
		}
		tail, err := rd.CallsTail(ctx, 3, n)
		if err != nil || len(tail) != 3 || tail[2].ID != tr.ModelCalls[n-1].ID || tail[0].Step != n-2 {
			t.Fatalf("tail: %+v, %v", tail, err)
		}
		mid, err := rd.CallsFrom(ctx, 3, 5)
		if err != nil || len(mid) != 2 || mid[0].ID != tr.ModelCalls[2].ID || mid[0].Step != 3 {
			t.Fatalf("from 3: %+v, %v", mid, err)
		}
		for i, want := range tr.ModelCalls {
			c, err := rd.Call(ctx, want.ID)
			if err != nil || c == nil || c.Index != want.Index || c.InputTokens != want.InputTokens || !c.StartedAt.Equal(want.StartedAt) {
				t.Fatalf("call %s: %+v, %v", want.ID, c, err)
			}
			if want.OutputMessageID != nil && (c.Output == nil || c.Output.ID != *want.OutputMessageID) {
				t.Fatalf("call %s: output %+v, want %s", want.ID, c.Output, *want.OutputMessageID)
			}
			// Each agent's latest call at the seq this one started at is
			// this one, as the log says.
			seq := startSeq(tr, want.ID)
			latest, err := rd.LatestCall(ctx, want.AgentID, seq)
			if err != nil || latest == nil || latest.ID != want.ID {
				t.Fatalf("latest call of %s at seq %d: %+v, %v; want %s", want.AgentID, seq, latest, err, want.ID)
			}
			if i == 0 {
				if c, err := rd.LatestCall(ctx, want.AgentID, seq-1); err != nil || c != nil {
					t.Fatalf("latest call before the first: %+v, %v", c, err)
				}
			}
		}
		first, err := rd.FirstCall(ctx, "a1")
		if err != nil || first == nil || first.AgentID != "a1" || first.Index != 0 {
			t.Fatalf("first call of a1: %+v, %v", first, err)
		}
		if c, err := rd.Call(ctx, "no-such-call"); err != nil || c != nil {
			t.Fatalf("no call: %+v, %v", c, err)
		}
	})
	t.Run("the log within the read", func(t *testing.T) {
		n := 0
		for _, err := range rd.Reader(ctx).Log() {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != len(tr.Events) {
			t.Fatalf("%d steps, want %d", n, len(tr.Events))
		}
	})
}

// startSeq is the seq of a call's model.started.
func startSeq(tr *trace.Trace, callID string) int64 {
	for _, ev := range tr.Events {
		if ev.Type == delegation.EventModelStarted && strings.Contains(string(ev.Data), `"`+callID+`"`) {
			return ev.Seq
		}
	}
	return 0
}

func testFiles(t *testing.T, s server.Store) {
	at := time.Now().UTC()
	id := "files"
	if err := s.CreateSession(ctx, &db.Session{ID: id, Name: "files", CreatedAt: at, Owner: "o", LeaseUntil: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var events []delegation.Event
	add := func(typ delegation.EventType, agent string, payload any) {
		events = append(events, delegation.Event{Seq: int64(len(events) + 1), Type: typ, AgentID: agent, At: at, Payload: payload})
		at = at.Add(time.Millisecond)
	}
	write := func(agent, from string, changes ...delegation.FileChange) {
		add(delegation.EventFilesChanged, agent, delegation.FilesChanged{From: from, Changes: changes})
	}
	add(delegation.EventSessionStarted, "", delegation.SessionStarted{SessionID: id, Name: "files", Files: map[string]string{
		"/seed.md": "seed", "/big.txt": strings.Repeat("0123456789", 20_000)}})
	add(delegation.EventAgentStarted, "main", delegation.AgentStarted{Agent: delegation.AgentInfo{ID: "main", Name: "main"}})
	add(delegation.EventAgentStarted, "a1", delegation.AgentStarted{Agent: delegation.AgentInfo{ID: "a1", Name: "w", ParentID: "main"}})
	// A log that grows at every step, past any limit on how versions are
	// kept; one that is rewritten shorter; the same text written again.
	grown := strings.Repeat("line\n", 300)
	for i := range 40 {
		grown += fmt.Sprintf("step %d\n", i)
		write("main", "", delegation.FileChange{Path: "/log.txt", Content: grown})
	}
	write("main", "", delegation.FileChange{Path: "/log.txt", Content: "short now"})
	write("main", "", delegation.FileChange{Path: "/seed.md", Content: "seed"}, delegation.FileChange{Path: "/empty.md"})
	// A child's file, then the same brought back to the parent; a delete.
	write("a1", "", delegation.FileChange{Path: "/report.md", Content: "the report"})
	write("main", "a1", delegation.FileChange{Path: "/report.md", Content: "the report"}, delegation.FileChange{Path: "/seed.md", Deleted: true})
	add(delegation.EventAgentFinished, "a1", delegation.AgentFinished{Status: delegation.StatusDone})
	add(delegation.EventAgentFinished, "main", delegation.AgentFinished{Status: delegation.StatusDone})
	add(delegation.EventSessionFinished, "", delegation.SessionFinished{Status: delegation.StatusDone})
	appendAsBuilt(t, s, id, events)
	rd, err := s.ReadPage(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	files, err := rd.Files(ctx, "", 10, 4)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, f := range files {
		listed = append(listed, fmt.Sprintf("%s %d %q", f.Path, f.Size, f.Preview))
	}
	if got, want := strings.Join(listed, "; "), `/big.txt 200000 "0123"; /empty.md 0 ""; /log.txt 9 "shor"; /report.md 10 "the "`; got != want {
		t.Fatalf("files: %s\nwant: %s", got, want)
	}
	if page, err := rd.Files(ctx, "/empty.md", 1, 4); err != nil || len(page) != 1 || page[0].Path != "/log.txt" {
		t.Fatalf("files after /empty.md: %+v, %v", page, err)
	}
	at2, err := rd.FilesAt(ctx, []string{"/report.md", "/seed.md"}, 100)
	if err != nil || len(at2) != 1 || at2["/report.md"].Preview != "the report" {
		t.Fatalf("files at: %+v, %v", at2, err)
	}
	if c, ok, err := rd.FileContent(ctx, "/big.txt"); err != nil || !ok || c != strings.Repeat("0123456789", 20_000) {
		t.Fatalf("big file: %d bytes, %v, %v", len(c), ok, err)
	}
	if _, ok, err := rd.FileContent(ctx, "/seed.md"); err != nil || ok {
		t.Fatalf("a deleted file: %v, %v", ok, err)
	}
}

func testSessions(t *testing.T, s server.Store) {
	base := time.Now().UTC().Add(-time.Hour)
	big := json.RawMessage(fmt.Sprintf(`{"name":"big","prompt":"p","pad":%q}`, strings.Repeat("x", 100_000)))
	for i := range 3 {
		if err := s.CreateSession(ctx, &db.Session{ID: fmt.Sprintf("s%d", i), Name: fmt.Sprintf("n%d", i), Title: "t", Prompt: "the prompt",
			Scenario: big, CreatedAt: base.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.Sessions(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range list {
		ids = append(ids, x.ID)
		if x.Scenario != nil || x.Name == "" || x.Status != delegation.StatusRunning || !x.CreatedAt.Equal(base.Add(time.Duration(x.ID[1]-'0')*time.Minute)) {
			t.Fatalf("listed %+v", x)
		}
	}
	if strings.Join(ids, ",") != "s2,s1,s0" {
		t.Fatalf("order %v, want newest first", ids)
	}
	if two, err := s.Sessions(ctx, 2); err != nil || len(two) != 2 {
		t.Fatalf("a limit of 2: %d, %v", len(two), err)
	}
	one, err := s.Session(ctx, "s1")
	if err != nil || string(one.Scenario) != string(big) || one.Prompt != "the prompt" || one.Title != "t" {
		t.Fatalf("a session: %v", err)
	}
	if _, err := s.Session(ctx, "nope"); code(err) != delegation.ENOTFOUND {
		t.Fatalf("no session: %v", err)
	}
}

// testSessionsWhere: a session's origin is its session.started's, and a
// list picks by it and by status, the limit counted after picking.
func testSessionsWhere(t *testing.T, s server.Store) {
	base := time.Now().UTC().Add(-time.Hour)
	origins := []*delegation.Origin{nil, {Kind: delegation.OriginProxy, Upstream: "script:x.json"}, {Kind: delegation.OriginOTLP}, {Kind: delegation.OriginProxy}}
	for i, o := range origins {
		id := fmt.Sprintf("s%d", i)
		if err := s.CreateSession(ctx, &db.Session{ID: id, Name: "n", CreatedAt: base.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		events := []delegation.Event{event(1, delegation.EventSessionStarted, "", delegation.SessionStarted{SessionID: id, Name: "n", Origin: o})}
		if i%2 == 1 {
			events = append(events, event(2, delegation.EventSessionFinished, "", delegation.SessionFinished{Status: delegation.StatusDone}))
		}
		if err := s.AppendEvents(ctx, id, events); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		f    db.SessionFilter
		want string
	}{
		{db.SessionFilter{}, "s3 s2 s1 s0"},
		{db.SessionFilter{Origin: delegation.OriginProxy}, "s3 s1"},
		{db.SessionFilter{Origin: delegation.OriginEngine}, "s0"},
		{db.SessionFilter{Status: delegation.StatusRunning}, "s2 s0"},
		{db.SessionFilter{Status: delegation.StatusDone, Origin: delegation.OriginProxy, Limit: 1}, "s3"},
		{db.SessionFilter{Status: delegation.StatusFailed}, ""},
	} {
		list, err := s.SessionsWhere(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, x := range list {
			if x.Origin != origins[x.ID[1]-'0'].OriginKind() {
				t.Errorf("%s: origin %q, want %q", x.ID, x.Origin, origins[x.ID[1]-'0'].OriginKind())
			}
			got = append(got, x.ID)
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%+v: %v, want %s", c.f, got, c.want)
		}
	}
}

func testViews(t *testing.T, s server.Store) {
	begin(t, s, "s", time.Now().Add(time.Hour))
	read := func() ([]byte, int64) {
		rd, err := s.ReadPage(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		b, seq, err := rd.View(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		return b, seq
	}
	if b, _ := read(); b != nil {
		t.Fatal("a view before any was saved")
	}
	if err := s.SaveView(ctx, "s", 3, 2, []byte(`{"at":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveView(ctx, "s", 2, 2, []byte(`{"at":2}`)); err != nil {
		t.Fatal(err)
	}
	if b, seq := read(); string(b) != `{"at":3}` || seq != 3 {
		t.Fatalf("view %s at %d: an older one replaced a newer", b, seq)
	}
	if err := s.SaveView(ctx, "s", 4, 1, []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if b, _ := read(); b != nil {
		t.Fatalf("a view of another version was read: %s", b)
	}
	if err := s.SaveView(ctx, "nope", 1, 2, []byte(`{}`)); code(err) != delegation.ENOTFOUND {
		t.Fatalf("a view of no session: %v", err)
	}
}

func testTeams(t *testing.T, s server.Store) {
	team := &db.Team{Name: "researchers", Title: "R", Scenario: json.RawMessage(`{"name":"researchers"}`)}
	if err := s.CreateTeam(ctx, team); err != nil || team.ID == "" {
		t.Fatalf("create: %v (id %q)", err, team.ID)
	}
	team.Title, team.Scenario = "R2", json.RawMessage(`{"name":"researchers","title":"R2"}`)
	if err := s.UpdateTeam(ctx, team); err != nil {
		t.Fatal(err)
	}
	got, err := s.Team(ctx, team.ID)
	if err != nil || got.Title != "R2" || string(got.Scenario) != string(team.Scenario) {
		t.Fatalf("team %+v, %v", got, err)
	}
	if list, err := s.Teams(ctx); err != nil || len(list) != 1 {
		t.Fatalf("teams %+v, %v", list, err)
	}
	if err := s.DeleteTeam(ctx, team.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Team(ctx, team.ID); code(err) != delegation.ENOTFOUND {
		t.Fatalf("a deleted team: %v", err)
	}
	if err := s.UpdateTeam(ctx, team); code(err) != delegation.ENOTFOUND {
		t.Fatalf("updating a deleted team: %v", err)
	}
}

func testRuns(t *testing.T, s server.Store) {
	for _, id := range []string{"s1", "s2"} {
		begin(t, s, id, time.Now().Add(time.Hour))
	}
	old := &db.Run{Kind: db.RunLesson, Lesson: "receipt", Mode: "ours",
		Sessions: []db.RunSession{{Variant: "text", SessionID: "s1"}, {Variant: "structured", SessionID: "s2"}}}
	if err := s.CreateRun(ctx, old); err != nil || old.ID == "" {
		t.Fatalf("create: %v (id %q)", err, old.ID)
	}
	latest := &db.Run{Kind: db.RunLesson, Lesson: "receipt", Mode: "ours",
		Sessions: []db.RunSession{{Variant: "text", SessionID: "s2"}, {Variant: "structured", SessionID: "s1"}}}
	team := &db.Run{Kind: db.RunTeam, TeamID: "t1", Sessions: []db.RunSession{{Variant: "run", SessionID: "s2"}}}
	for _, r := range []*db.Run{latest, team} {
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := s.Runs(ctx, db.RunFilter{Kind: db.RunLesson, Lesson: "receipt"})
	if err != nil || len(runs) != 2 || runs[0].ID != latest.ID || runs[1].ID != old.ID {
		t.Fatalf("a lesson's runs %+v, %v: want the latest first", runs, err)
	}
	if rs := runs[0].Sessions; len(rs) != 2 || rs[0].Variant != "text" || rs[0].SessionID != "s2" || rs[0].Status != delegation.StatusRunning {
		t.Fatalf("the latest run's sessions %+v: want them in order, with their status", rs)
	}
	if runs, err := s.Runs(ctx, db.RunFilter{Kind: db.RunTeam, TeamID: "t1"}); err != nil || len(runs) != 1 || runs[0].ID != team.ID {
		t.Fatalf("the team's runs %+v, %v", runs, err)
	}
	if r, err := s.Run(ctx, old.ID); err != nil || r.Lesson != "receipt" || len(r.Sessions) != 2 {
		t.Fatalf("run %+v, %v", r, err)
	}
	if _, err := s.Run(ctx, "nope"); code(err) != delegation.ENOTFOUND {
		t.Fatalf("a missing run: %v", err)
	}
	tm := &db.Team{Name: "receipt-team", Scenario: json.RawMessage(`{"name":"receipt-team"}`)}
	if err := s.CreateTeamFrom(ctx, tm, "lesson:receipt"); err != nil {
		t.Fatal(err)
	}
	if src, err := s.TeamSource(ctx, tm.ID); err != nil || src != "lesson:receipt" {
		t.Fatalf("source %q, %v", src, err)
	}
	if names, err := s.TeamNames(ctx); err != nil || !names["receipt-team"] {
		t.Fatalf("names %v, %v", names, err)
	}
}

func testPushes(t *testing.T, s server.Store) {
	begin(t, s, "s", time.Now().Add(time.Hour))
	if seq, err := s.PushedSeq(ctx, "s", "http://a"); err != nil || seq != 0 {
		t.Fatalf("before a push: %d, %v", seq, err)
	}
	if err := s.SetPushedSeq(ctx, "s", "http://a", 3); err != nil {
		t.Fatal(err)
	}
	if seq, err := s.PushedSeq(ctx, "s", "http://a"); err != nil || seq != 3 {
		t.Fatalf("after a push: %d, %v", seq, err)
	}
	if seq, _ := s.PushedSeq(ctx, "s", "http://b"); seq != 0 {
		t.Fatalf("another endpoint: %d", seq)
	}
}

func testCounts(t *testing.T, s server.Store) {
	begin(t, s, "running", time.Now().Add(time.Hour))
	begin(t, s, "done", time.Now().Add(time.Hour))
	if err := s.AppendEvents(ctx, "done", []delegation.Event{event(4, delegation.EventSessionFinished, "",
		delegation.SessionFinished{Status: delegation.StatusDone})}); err != nil {
		t.Fatal(err)
	}
	counts, err := s.SessionCounts(ctx)
	if err != nil || counts[delegation.StatusRunning] != 1 || counts[delegation.StatusDone] != 1 {
		t.Fatalf("counts %v, %v", counts, err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// testAnyText: what an agent wrote is kept byte for byte, whatever it holds
// (a tool's binary output, a received span's attribute): a NUL in a
// message, its reasoning, the file it was evicted to, a file, a prompt, a
// system prompt, what an endpoint said of its answer.
func testAnyText(t *testing.T, s server.Store) {
	odd := "before\x00after"
	at := time.Now().UTC()
	id := "odd"
	if err := s.CreateSession(ctx, &db.Session{ID: id, Name: "odd", Prompt: odd, CreatedAt: at, Owner: "o", LeaseUntil: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ev := func(seq int64, typ delegation.EventType, agent string, payload any) delegation.Event {
		return delegation.Event{Seq: seq, Type: typ, AgentID: agent, At: at, Payload: payload}
	}
	events := []delegation.Event{
		ev(1, delegation.EventSessionStarted, "", delegation.SessionStarted{SessionID: id, Name: "odd", Prompt: odd,
			Files: map[string]string{"/seed.bin": odd}}),
		ev(2, delegation.EventAgentStarted, "main", delegation.AgentStarted{Agent: delegation.AgentInfo{ID: "main", Name: "main"}, SystemPrompt: odd}),
		ev(3, delegation.EventMessageAdded, "main", delegation.MessageAdded{Index: 0, Message: &delegation.Message{ID: "main.0", AgentID: "main",
			Role: delegation.RoleUser, Content: odd, Tokens: 1, Evicted: &delegation.Eviction{Path: "/conversation_history/" + odd, Chars: 250018, Tokens: 62505}}}),
		ev(4, delegation.EventModelStarted, "main", delegation.ModelStarted{Call: delegation.ModelCall{ID: "main.c0", AgentID: "main",
			Purpose: delegation.PurposeTurn, SystemPrompt: odd, Context: []delegation.Range{{AgentID: "main", From: 0, To: 1}}, InputTokens: 1}}),
		ev(5, delegation.EventMessageAdded, "main", delegation.MessageAdded{Index: 1, Message: &delegation.Message{ID: "main.1", AgentID: "main",
			Role: delegation.RoleAssistant, Content: odd, Reasoning: odd, Tokens: 1}}),
		ev(6, delegation.EventModelFinished, "main", delegation.ModelFinished{ModelCallID: "main.c0", OutputMessageID: "main.1", OutputTokens: 1,
			Response: &delegation.ResponseMeta{ID: "chatcmpl-" + odd, Model: odd, FinishReason: "tool_calls"}}),
		ev(7, delegation.EventFilesChanged, "main", delegation.FilesChanged{Changes: []delegation.FileChange{{Path: "/out.bin", Content: odd}}}),
		ev(8, delegation.EventSessionFinished, "", delegation.SessionFinished{Status: delegation.StatusDone}),
	}
	got := appendAsBuilt(t, s, id, events)
	for _, m := range got.Messages {
		if m.Content != odd {
			t.Fatalf("message %s: %q, want %q", m.ID, m.Content, odd)
		}
	}
	if e := got.Messages[0].Evicted; e == nil || *e != (delegation.Eviction{Path: "/conversation_history/" + odd, Chars: 250018, Tokens: 62505}) {
		t.Fatalf("an evicted message's eviction came back as %+v", e)
	}
	if got.Messages[1].Evicted != nil {
		t.Fatalf("a message that was not evicted came back evicted: %+v", got.Messages[1].Evicted)
	}
	if r := got.ModelCalls[0].Response; r == nil || *r != (delegation.ResponseMeta{ID: "chatcmpl-" + odd, Model: odd, FinishReason: "tool_calls"}) {
		t.Fatalf("what the endpoint said of its answer came back as %+v", r)
	}
	rd, err := s.ReadPage(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if c, ok, err := rd.FileContent(ctx, "/out.bin"); err != nil || !ok || c != odd {
		t.Fatalf("file: %q, %v, %v", c, ok, err)
	}
	if files, err := rd.Files(ctx, "", 10, 8); err != nil || len(files) != 2 || files[0].Preview != odd[:8] {
		t.Fatalf("files: %+v, %v", files, err)
	}
}

// appendAsBuilt appends a session's events in one batch and checks that
// its trace reads back as the trace the log builds; it returns it.
func appendAsBuilt(t *testing.T, s server.Store, id string, events []delegation.Event) *trace.Trace {
	t.Helper()
	if err := s.AppendEvents(ctx, id, events); err != nil {
		t.Fatal(err)
	}
	want, err := trace.Build(trace.Meta{ID: id}, events)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Trace(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	got.Scenario = want.Scenario
	same(t, "the trace", got, want)
	return got
}
