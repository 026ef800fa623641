package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/live"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/web/templates"
)

// wireEvent is a live message: the event as the trace keeps it, the message
// or model call it introduced, and the patches that bring a session page up
// to date with it (server-rendered fragments for the page to apply).
type wireEvent struct {
	Seq     int64            `json:"seq"`
	Type    string           `json:"type"`
	AgentID *string          `json:"agent_id"`
	At      time.Time        `json:"at"`
	Data    json.RawMessage  `json:"data"`
	Message *trace.Message   `json:"message,omitempty"`
	Call    *trace.ModelCall `json:"call,omitempty"`
	Patches []patch          `json:"patches,omitempty"`
}

// patch is a change to a session page: op "append", "replace" or "inner"
// puts HTML at the elements sel finds; "text" appends plain text.
type patch struct {
	Sel  string `json:"sel"`
	Op   string `json:"op"`
	HTML string `json:"html"`
}

// liveViews follows the running sessions: the runner publishes every event
// to it, it keeps each session's trace up to date and hands the hub one
// encoded message per event, rendered once whatever the number of viewers.
type liveViews struct {
	hub *live.Hub
	log *slog.Logger

	mu       sync.Mutex
	builders map[string]*trace.Builder
}

func newLiveViews(hub *live.Hub, log *slog.Logger) *liveViews {
	return &liveViews{hub: hub, log: log, builders: map[string]*trace.Builder{}}
}

var _ session.Publisher = (*liveViews)(nil)

// Publish takes a session's next stored event (or a live-only one).
func (lv *liveViews) Publish(sessionID string, ev delegation.Event) {
	if ev.Seq == 0 {
		if lv.hub.Viewers(sessionID) == 0 {
			return
		}
		sp, err := trace.SplitEvent(ev)
		if err != nil {
			return
		}
		lv.send(sessionID, ev, sp, livePatches(ev, sp))
		return
	}
	lv.mu.Lock()
	b := lv.builders[sessionID]
	if b == nil {
		b = trace.NewBuilder(trace.Meta{ID: sessionID})
		lv.builders[sessionID] = b
	}
	if ev.Type == delegation.EventSessionFinished {
		delete(lv.builders, sessionID)
	}
	lv.mu.Unlock()
	// One goroutine (the session's recorder) publishes a session's stored
	// events, so its builder needs no lock of its own.
	sp, err := b.Add(ev)
	if err != nil {
		lv.log.Error("live view", "session", sessionID, "err", err)
		return
	}
	if lv.hub.Viewers(sessionID) == 0 {
		return
	}
	lv.send(sessionID, ev, sp, pagePatches(b.Trace(), ev, sp))
}

func (lv *liveViews) send(sessionID string, ev delegation.Event, sp trace.Split, patches []patch) {
	data, err := encodeWire(ev, sp, patches)
	if err != nil {
		lv.log.Error("encode live event", "session", sessionID, "err", err)
		return
	}
	lv.hub.Publish(sessionID, live.Message{Seq: ev.Seq, Data: data})
}

func encodeWire(ev delegation.Event, sp trace.Split, patches []patch) ([]byte, error) {
	w := wireEvent{Seq: ev.Seq, Type: string(ev.Type), At: ev.At.UTC(), Data: sp.Event.Data,
		Message: sp.Message, Call: sp.Call, Patches: patches}
	if ev.AgentID != "" {
		id := ev.AgentID
		w.AgentID = &id
	}
	return json.Marshal(w)
}

func html(c templ.Component) string {
	var b bytes.Buffer
	_ = c.Render(context.Background(), &b)
	return b.String()
}

// livePatches are the patches of live-only events: streamed text.
func livePatches(ev delegation.Event, sp trace.Split) []patch {
	if ev.Type != delegation.EventModelDelta {
		return nil
	}
	var d delegation.ModelDelta
	if json.Unmarshal(sp.Event.Data, &d) != nil {
		return nil
	}
	return []patch{{Sel: attrIs("data-stream", d.ModelCallID), Op: "text", HTML: d.Text}}
}

// pagePatches are the changes one stored event makes to a session page; t
// is the trace with the event applied.
func pagePatches(t *trace.Trace, ev delegation.Event, sp trace.Split) []patch {
	var ps []patch
	switch ev.Type {
	case delegation.EventMessageAdded:
		m := sp.Message
		ps = append(ps, patch{Sel: attrIs("data-list", m.AgentID) + "[data-live]", Op: "append",
			HTML: html(templates.MessageItem(messageView(t.Session.ID, *m)))})
	case delegation.EventModelStarted:
		c := *sp.Call
		if built := findCall(t, c.ID); built != nil {
			c = *built // the builder's copy knows when it started
		}
		r := lightRow(t, c)
		r.Running = true
		ps = append(ps, patch{Sel: "#timeline", Op: "append", HTML: html(templates.TimelineItem(r))})
		ps = append(ps, totalsPatch(t))
	case delegation.EventModelFinished:
		if c := findCall(t, sp.Finished.ModelCallID); c != nil {
			r := lightRow(t, *c)
			if out := findMessage(t, sp.Finished.OutputMessageID); out != nil {
				r.OutputTokens, r.Output = out.Tokens, session.Excerpt(out.Content, 160)
				for _, tc := range out.ToolCalls {
					r.ToolCalls = append(r.ToolCalls, tc.Name+" "+session.Excerpt(readableJSON(tc.Args), 80))
				}
			}
			// An attribute selector: call ids hold dots, which "#…" would read as classes.
			ps = append(ps, patch{Sel: attrIs("id", "call-"+c.ID), Op: "replace", HTML: html(templates.TimelineItem(r))})
		}
	case delegation.EventAgentStarted, delegation.EventAgentFinished, delegation.EventDelegationStarted,
		delegation.EventDelegationFinished, delegation.EventDelegationRefused:
		ps = append(ps, treePatch(t))
	case delegation.EventSpanReceived:
		if r, ok := spanRow(sp.Event); ok {
			ps = append(ps, patch{Sel: "#spans", Op: "append", HTML: html(templates.SpanItem(r))})
		}
	case delegation.EventFilesChanged:
		if ev.AgentID == "main" {
			ps = append(ps, patch{Sel: "#files", Op: "inner", HTML: html(templates.Files(newPageModel(t).files()))})
		}
	case delegation.EventSessionFinished:
		m := newPageModel(t)
		ps = append(ps,
			patch{Sel: "#status", Op: "replace", HTML: html(templates.StatusBadge(t.Session.Status, t.Session.Error))},
			patch{Sel: "#answer", Op: "inner", HTML: html(templates.Answer(m.answer(), t.Session.Status))},
			patch{Sel: "#files", Op: "inner", HTML: html(templates.Files(m.files()))},
			treePatch(t), totalsPatch(t))
	}
	return ps
}

func treePatch(t *trace.Trace) patch {
	return patch{Sel: "#tree", Op: "inner", HTML: html(templates.TreeSVG(t.Session.ID, session.Layout(session.Tree(t), "")))}
}

func totalsPatch(t *trace.Trace) patch {
	tokens := 0
	for _, c := range t.ModelCalls {
		tokens += c.InputTokens
	}
	return patch{Sel: "#totals", Op: "inner", HTML: html(templates.Totals(len(t.Agents), len(t.ModelCalls), tokens))}
}

// lightRow is a timeline row made without the whole page model: a live
// event must cost little however long the session.
func lightRow(t *trace.Trace, c trace.ModelCall) templates.TimelineRow {
	r := templates.TimelineRow{CallID: c.ID, AgentID: c.AgentID, AgentName: c.AgentID, Purpose: c.Purpose, Index: c.Index,
		InputTokens: c.InputTokens, DurationMS: c.DurationMS, Error: c.Error, StartedAt: c.StartedAt}
	for _, a := range t.Agents {
		if a.ID == c.AgentID {
			r.AgentName = a.Name
			if a.ParentID != nil {
				r.Depth = 1
			}
		}
	}
	return r
}

// findCall and findMessage look from the end: live events are about recent ones.
func findCall(t *trace.Trace, id string) *trace.ModelCall {
	for i := len(t.ModelCalls) - 1; i >= 0; i-- {
		if t.ModelCalls[i].ID == id {
			return &t.ModelCalls[i]
		}
	}
	return nil
}

func findMessage(t *trace.Trace, id string) *trace.Message {
	if id == "" {
		return nil
	}
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if t.Messages[i].ID == id {
			return &t.Messages[i]
		}
	}
	return nil
}

// apiLive is the session's websocket: every event after ?after=SEQ, then
// live events as they happen (formats.md §5).
func (s *Server) apiLive(c echo.Context) error {
	id := c.Param("id")
	after, err := strconv.ParseInt(c.QueryParam("after"), 10, 64)
	if c.QueryParam("after") == "" {
		after, err = 0, nil
	}
	if err != nil || after < 0 {
		return echo.NewHTTPError(400, "after must be a seq: a whole number, 0 or more")
	}
	if _, err := s.cfg.DB.Session(c.Request().Context(), id); err != nil {
		return err
	}
	// The backlog is the stored log after `after`, rendered with the page
	// state each event leaves, computed once for this connection.
	var cache []live.Message
	loaded := false
	backlog := func(ctx context.Context, from int64, limit int) ([]live.Message, error) {
		if !loaded {
			var err error
			if cache, err = s.backlog(ctx, id, after); err != nil {
				return nil, err
			}
			loaded = true
		}
		var out []live.Message
		for _, m := range cache {
			if m.Seq > from && len(out) < limit {
				out = append(out, m)
			}
		}
		return out, nil
	}
	return s.hub.Serve(c.Response(), c.Request(), id, after, backlog, live.ServeOptions{})
}

func (s *Server) backlog(ctx context.Context, id string, after int64) ([]live.Message, error) {
	t, err := s.cfg.DB.Trace(ctx, id)
	if err != nil {
		return nil, err
	}
	events, err := trace.Inflate(t)
	if err != nil {
		return nil, err
	}
	b := trace.NewBuilder(trace.Meta{ID: id, Title: t.Session.Title, Scenario: t.Scenario})
	var out []live.Message
	for _, ev := range events {
		sp, err := b.Add(ev)
		if err != nil {
			return nil, err
		}
		if ev.Seq <= after {
			continue
		}
		data, err := encodeWire(ev, sp, pagePatches(b.Trace(), ev, sp))
		if err != nil {
			return nil, err
		}
		out = append(out, live.Message{Seq: ev.Seq, Data: data})
	}
	return out, nil
}
