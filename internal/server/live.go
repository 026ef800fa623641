package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/live"
	"github.com/delegationstudio/studio/internal/present"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// wireEvent is a live message: the event as the trace keeps it, the message
// or model call it introduced, and the patches that bring a session page up
// to date (server-rendered fragments for the page to apply). The patches of
// a batch of events ride on its last event. A "sync" message (seq, no
// event) brings a page opened at an older seq to its session's seq at once.
type wireEvent struct {
	Seq     int64            `json:"seq"`
	Type    string           `json:"type"`
	AgentID *string          `json:"agent_id"`
	At      time.Time        `json:"at"`
	Data    json.RawMessage  `json:"data,omitempty"`
	Message *trace.Message   `json:"message,omitempty"`
	Call    *trace.ModelCall `json:"call,omitempty"`
	Patches []present.Patch  `json:"patches,omitempty"`
}

// liveViews renders the patches of a session's batches for its viewers,
// once per batch whatever the number of viewers, and nothing for a session
// nobody watches.
type liveViews struct {
	hub *live.Hub
	db  Store
	log *slog.Logger
}

var _ session.Publisher = (*liveViews)(nil)

// Publish takes a session's next stored batch, or a live-only event.
func (lv *liveViews) Publish(sessionID string, events []delegation.Event, ch view.Changes, v *session.Live) {
	if len(events) == 0 {
		return
	}
	lv.publish(sessionID, batchOf{n: len(events), event: func(i int) delegation.Event { return events[i] },
		full: func(i int) ([]byte, error) { return encodeWire(events[i]) }}, ch, v)
}

// PublishStored takes a batch of a session another replica runs, read back
// from the store and folded into v here (replicas.go).
func (lv *liveViews) PublishStored(sessionID string, events []db.LoggedEvent, ch view.Changes, v *session.Live) {
	if len(events) == 0 {
		return
	}
	lv.publish(sessionID, batchOf{n: len(events), event: func(i int) delegation.Event { return events[i].Event },
		full: func(i int) ([]byte, error) {
			return encodeLogged(events[i].Event, events[i].Message, events[i].Call, nil)
		}}, ch, v)
}

// batchOf is a batch of n events to publish: the i-th event, and its
// encoding with what it introduced (for programs' streams).
type batchOf struct {
	n     int
	event func(i int) delegation.Event
	full  func(i int) ([]byte, error)
}

// publish sends a batch as one message to each of the session's topics
// that has viewers: to its pages in each language (each event's head, the
// patches drawn in that language on the last line), and to programs (each
// event whole, the patches in English on the last line). Nothing is drawn
// or encoded for a topic nobody listens to.
func (lv *liveViews) publish(sessionID string, b batchOf, ch view.Changes, v *session.Live) {
	first, last := b.event(0).Seq, b.event(b.n-1).Seq
	programs := lv.hub.Viewers(sessionID) > 0
	for _, code := range i18n.Codes {
		pages := lv.hub.Viewers(pageTopic(sessionID, code)) > 0
		forPrograms := programs && code == i18n.English // programs' patches are English
		if !pages && !forPrograms {
			continue
		}
		patches, err := lv.patches(sessionID, i18n.Get(code), first == 0, ch, v)
		if err != nil {
			lv.log.Error("live patches", "session", sessionID, "err", err)
		}
		var ps []byte
		if len(patches) > 0 {
			if ps, err = marshalJSON(patches); err != nil {
				lv.log.Error("encode live patches", "session", sessionID, "err", err)
				return
			}
		}
		if pages {
			data, err := lines(b.n, func(i int) ([]byte, error) { return marshalWire(pageLine(b.event(i))) }, ps)
			if err != nil {
				lv.log.Error("encode live event", "session", sessionID, "err", err)
				return
			}
			lv.hub.Publish(pageTopic(sessionID, code), live.Message{First: first, Seq: last, Data: data})
		}
		if forPrograms {
			data, err := lines(b.n, b.full, ps)
			if err != nil {
				lv.log.Error("encode live event", "session", sessionID, "err", err)
				return
			}
			lv.hub.Publish(sessionID, live.Message{First: first, Seq: last, Data: data})
		}
	}
}

// lines joins n encoded events, one a line, the encoded patches on the
// last: one websocket message, one send to each viewer and one write.
func lines(n int, line func(int) ([]byte, error), patches []byte) ([]byte, error) {
	var data []byte
	for i := range n {
		l, err := line(i)
		if err != nil {
			return nil, err
		}
		if i == n-1 && patches != nil {
			l = withPatches(l, patches)
		}
		if i > 0 {
			data = append(data, '\n')
		}
		data = append(data, l...)
	}
	return data, nil
}

// A program's stream of a session listens on the session's id: each event
// whole, as the trace has it. A session page listens on pageTopic, in its
// reader's language: each event's head and the patches drawn in that
// language (it reads nothing else).
func pageTopic(sessionID, code string) string { return sessionID + "@" + code }

// liveTopics are every topic of a session.
func liveTopics(sessionID string) []string {
	out := []string{sessionID}
	for _, code := range i18n.Codes {
		out = append(out, pageTopic(sessionID, code))
	}
	return out
}

// liveViewers counts a session's viewers, programs and pages.
func liveViewers(h *live.Hub, sessionID string) int {
	n := 0
	for _, t := range liveTopics(sessionID) {
		n += h.Viewers(t)
	}
	return n
}

// pageLine is an event's head, as a session page's stream sends it (with
// the patches on a batch's last line).
func pageLine(ev delegation.Event) wireEvent {
	w := wireEvent{Seq: ev.Seq, Type: string(ev.Type), At: ev.At.UTC()}
	if ev.AgentID != "" {
		id := ev.AgentID
		w.AgentID = &id
	}
	return w
}

func (lv *liveViews) patches(sessionID string, lang *i18n.Lang, streamed bool, ch view.Changes, v *session.Live) ([]present.Patch, error) {
	if ch.None() {
		return nil, nil
	}
	if streamed {
		return present.StreamPatches(ch), nil // nothing else changes with streamed text
	}
	st := v.Clone()
	rd, err := lv.db.ReadPage(context.Background(), sessionID)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return present.New(i18n.With(context.Background(), lang), st, rd).Patches(ch)
}

// encodeWire encodes an event with what it introduced, as the trace has
// them.
func encodeWire(ev delegation.Event) ([]byte, error) {
	st, err := trace.StepOf(ev)
	if err != nil {
		return nil, err
	}
	stored, err := st.Stored()
	if err != nil {
		return nil, err
	}
	return encodeLogged(stored, st.Message, st.Call, nil)
}

func encodeLogged(ev delegation.Event, m *trace.Message, c *trace.ModelCall, patches []present.Patch) ([]byte, error) {
	w := wireEvent{Seq: ev.Seq, Type: string(ev.Type), At: ev.At.UTC(), Data: ev.Data, Message: m, Call: c, Patches: patches}
	if ev.AgentID != "" {
		id := ev.AgentID
		w.AgentID = &id
	}
	if c != nil && w.Call.StartedAt.IsZero() {
		cc := *c
		cc.StartedAt = w.At
		w.Call = &cc
	}
	return marshalWire(w)
}

// marshalWire encodes a live message as compact JSON, leaving <, > and &
// as they are: it is read by JSON.parse, never put in HTML, and patches
// are mostly HTML, which escaping would grow by a quarter.
func marshalWire(w wireEvent) ([]byte, error) { return marshalJSON(w) }

// withPatches adds encoded patches to an encoded line that has none, as
// its last field.
func withPatches(line, patches []byte) []byte {
	out := make([]byte, 0, len(line)+len(patches)+12)
	out = append(out, line[:len(line)-1]...)
	out = append(out, `,"patches":`...)
	out = append(out, patches...)
	return append(out, '}')
}

func marshalJSON(w any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// apiLive is the session's websocket: every event after ?after=SEQ, then
// live events as they happen (formats.md §5). With ?view=1 (the session
// page's own), a page opened at SEQ gets instead one "sync" message that
// brings it to the session's seq, drawn for its choice (?agent, ?step,
// ?timeline), then live events with their patches.
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
	var backlog live.Backlog
	// A session page listens in its reader's language: its patches are
	// drawn in it. A program's stream is the session's own, in English.
	topic := id
	if c.QueryParam("view") != "" {
		ch := choiceOf(c)
		lang := i18n.Get(requestLang(c.Request()))
		topic = pageTopic(id, lang.Code)
		backlog = func(ctx context.Context, from int64, limit int) ([]live.Message, error) {
			st, rd, err := s.runner.View(ctx, id)
			if err != nil {
				return nil, err
			}
			defer rd.Close()
			if st.Seq <= from {
				return nil, nil // nothing to send: the page is up to date
			}
			ps, err := present.New(i18n.With(ctx, lang), st, rd).SyncPatches(ch, s.running(ctx, id, st.Session.Status))
			if err != nil {
				return nil, err
			}
			data, err := marshalWire(wireEvent{Seq: st.Seq, Type: "sync", At: time.Now().UTC(), Patches: ps})
			return []live.Message{{Seq: st.Seq, Data: data}}, err
		}
	} else {
		// The stored log, a page at a time, straight from the store.
		backlog = func(ctx context.Context, from int64, limit int) ([]live.Message, error) {
			events, err := s.cfg.DB.EventsPage(ctx, id, from, limit)
			if err != nil {
				return nil, err
			}
			out := make([]live.Message, 0, len(events))
			for _, ev := range events {
				data, err := encodeLogged(ev.Event, ev.Message, ev.Call, nil)
				if err != nil {
					return nil, err
				}
				out = append(out, live.Message{Seq: ev.Seq, Data: data})
			}
			return out, nil
		}
	}
	return s.hub.Serve(c.Response(), c.Request(), topic, after, backlog, live.ServeOptions{})
}
