package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/schema"
)

// MaxBytes is the largest trace document Parse reads: 64 MiB.
const MaxBytes = 64 << 20

// Positions say where each agent, message and model call was introduced in
// the log, which is what a store needs to file them.
type Positions struct {
	AgentSeq     map[string]int64
	Message      map[string]At // its message.added
	MessageIndex map[string]int
	Call         map[string]At // its model.started
	CallFinished map[string]At // its model.finished
}

// At is an event's place in the log.
type At struct {
	Seq int64
	At  time.Time
}

// Parse reads a trace document and checks it whole: its size, the published
// schema, and that every id it refers to exists and seq strictly increases.
// A problem is a *delegation.Error (EINVALID with every problem in Fields,
// or ETOOLARGE); nothing is returned half-checked.
func Parse(raw []byte) (*Trace, *Positions, error) {
	return ParseContext(context.Background(), raw)
}

// ParseContext is Parse that gives up, with ctx's error, when ctx ends: the
// client that sent the trace went away.
func ParseContext(ctx context.Context, raw []byte) (*Trace, *Positions, error) {
	if len(raw) > MaxBytes {
		return nil, nil, delegation.Errorf(delegation.ETOOLARGE, "the trace is %d bytes; the most a trace may have is %d (64 MiB)", len(raw), MaxBytes)
	}
	errs, err := schema.ValidateTraceContext(ctx, raw)
	if err != nil {
		return nil, nil, err
	}
	if len(errs) > 0 {
		fe := make(delegation.FieldErrors, len(errs))
		for i, e := range errs {
			fe[i] = delegation.FieldError{Field: e.Field, Message: e.Message}
		}
		return nil, nil, invalid(fe)
	}
	var t Trace
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&t); err != nil {
		return nil, nil, invalid(delegation.FieldErrors{{Message: fmt.Sprintf("cannot read the trace: %v", err)}})
	}
	pos, fe := t.check(ctx)
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if len(fe) > 0 {
		return nil, nil, invalid(fe)
	}
	return &t, pos, nil
}

func invalid(fe delegation.FieldErrors) error {
	msg := "the trace is not valid: " + fe[0].Error()
	if n := delegation.CountErrors(fe); n > 1 {
		msg += fmt.Sprintf(" (and %d more problems)", n-1)
	}
	return &delegation.Error{Code: delegation.EINVALID, Message: msg, Fields: fe}
}

// Check verifies what a schema cannot: that ids are unique, that every id
// referred to exists, that contexts stay inside their message lists, and
// that seq strictly increases. It returns where everything was introduced.
func (t *Trace) Check() (*Positions, delegation.FieldErrors) {
	return t.check(context.Background())
}

// check is Check that gives up when ctx ends (it then returns nothing).
func (t *Trace) check(ctx context.Context) (_ *Positions, errs delegation.FieldErrors) {
	more := 0
	k := &checker{
		add: func(field, format string, args ...any) {
			if len(errs) < delegation.MaxFieldErrors {
				errs.Add(field, format, args...)
			} else {
				more++
			}
		},
		pos: &Positions{AgentSeq: map[string]int64{}, Message: map[string]At{}, MessageIndex: map[string]int{},
			Call: map[string]At{}, CallFinished: map[string]At{}},
		agents: map[string]bool{}, messages: map[string]bool{}, calls: map[string]bool{}, listLen: map[string]int{},
	}
	defer func() {
		if more > 0 {
			errs = append(errs, delegation.MoreErrors(more))
		}
	}()
	k.rows(t)
	if t.Session.Status == delegation.StatusRunning {
		// Nothing in this studio runs it: it would show as running forever.
		k.add("session.status", `a session cannot be imported as "running": nothing here would ever finish it; export it again once it has ended, or set its status to "interrupted"`)
	}
	var last int64
	for i, ev := range t.Events {
		f := fmt.Sprintf("events[%d]", i)
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, nil
		}
		// Export numbers the events 1, 2, 3… with no gap: a seq of 2^63-1
		// would leave a session no room to grow and mean nothing.
		if ev.Seq != last+1 {
			k.add(f+".seq", "seq %d does not follow %d: seq must increase strictly, by one from 1", ev.Seq, last)
		}
		last = ev.Seq
		if ev.AgentID != "" && !k.agents[ev.AgentID] {
			k.add(f+".agent_id", "agent %q is not in agents", ev.AgentID)
		}
		k.event(f, ev)
	}
	k.covered(t)
	return k.pos, errs
}

// checker is what check has seen so far.
type checker struct {
	add                     func(field, format string, args ...any)
	pos                     *Positions
	agents, messages, calls map[string]bool
	listLen                 map[string]int // messages per agent
}

// rows checks the agents, messages and model calls: ids once, references
// to what is listed before.
func (k *checker) rows(t *Trace) {
	for i, a := range t.Agents {
		f := fmt.Sprintf("k.agents[%d]", i)
		if k.agents[a.ID] {
			k.add(f+".id", "agent id %q appears twice", a.ID)
		}
		if a.ParentID != nil && !k.agents[*a.ParentID] {
			k.add(f+".parent_id", "parent %q is not an agent listed before this one", *a.ParentID)
		}
		k.agents[a.ID] = true
	}
	for i, m := range t.Messages {
		f := fmt.Sprintf("k.messages[%d]", i)
		if k.messages[m.ID] {
			k.add(f+".id", "message id %q appears twice", m.ID)
		}
		k.messages[m.ID] = true
		if !k.agents[m.AgentID] {
			k.add(f+".agent_id", "agent %q is not in agents", m.AgentID)
		}
		k.pos.MessageIndex[m.ID] = k.listLen[m.AgentID]
		k.listLen[m.AgentID]++
	}
	for i, c := range t.ModelCalls {
		f := fmt.Sprintf("model_calls[%d]", i)
		if k.calls[c.ID] {
			k.add(f+".id", "model call id %q appears twice", c.ID)
		}
		k.calls[c.ID] = true
		if !k.agents[c.AgentID] {
			k.add(f+".agent_id", "agent %q is not in agents", c.AgentID)
		}
		for j, r := range c.Context {
			rf := fmt.Sprintf("%s.context[%d]", f, j)
			switch {
			case !k.agents[r.AgentID]:
				k.add(rf+".agent_id", "agent %q is not in agents", r.AgentID)
			case r.From < 0 || r.From > r.To || r.To > k.listLen[r.AgentID]:
				k.add(rf, "range %d…%d is outside agent %q's %d messages", r.From, r.To, r.AgentID, k.listLen[r.AgentID])
			}
		}
		if c.OutputMessageID != nil && !k.messages[*c.OutputMessageID] {
			k.add(f+".output_message_id", "message %q is not in messages", *c.OutputMessageID)
		}
	}
}

// event checks the references of one event's data, and notes where
// messages and calls begin.
func (k *checker) event(f string, ev Event) {
	var ref struct {
		MessageID        string `json:"message_id"`
		Index            *int   `json:"index"`
		ModelCallID      string `json:"model_call_id"`
		SummaryMessageID string `json:"summary_message_id"`
		Agent            struct {
			ID string `json:"id"`
		} `json:"agent"`
	}
	if err := json.Unmarshal(ev.Data, &ref); err != nil {
		k.add(f+".data", "cannot read the data of a %s event: %v", ev.Type, err)
		return
	}
	// A store rebuilds these three from its message and call rows, so
	// they may hold nothing else.
	canonical := func(want json.RawMessage) {
		var got bytes.Buffer
		if json.Compact(&got, ev.Data) != nil || !bytes.Equal(got.Bytes(), want) {
			k.add(f+".data", "a %s event holds exactly %s", ev.Type, want)
		}
	}
	at := At{Seq: ev.Seq, At: ev.At}
	switch ev.Type {
	case delegation.EventMessageAdded:
		switch {
		case !k.messages[ref.MessageID]:
			k.add(f+".data.message_id", "message %q is not in messages", ref.MessageID)
		case k.pos.Message[ref.MessageID].Seq != 0:
			k.add(f+".data.message_id", "message %q is added twice", ref.MessageID)
		case ref.Index == nil || *ref.Index != k.pos.MessageIndex[ref.MessageID]:
			k.add(f+".data.index", "message %q is at %d in its agent's list, not %v", ref.MessageID, k.pos.MessageIndex[ref.MessageID], ref.Index)
		default:
			k.pos.Message[ref.MessageID] = at
			canonical(MessageAddedData(*ref.Index, ref.MessageID))
		}
	case delegation.EventModelStarted, delegation.EventModelFinished:
		seen := k.pos.Call
		if ev.Type == delegation.EventModelFinished {
			seen = k.pos.CallFinished
		}
		switch {
		case !k.calls[ref.ModelCallID]:
			k.add(f+".data.model_call_id", "model call %q is not in model_calls", ref.ModelCallID)
		case seen[ref.ModelCallID].Seq != 0:
			k.add(f+".data.model_call_id", "model call %q has two %s events", ref.ModelCallID, ev.Type)
		case ev.Type == delegation.EventModelFinished && k.pos.Call[ref.ModelCallID].Seq == 0:
			k.add(f+".data.model_call_id", "model call %q finishes before it starts", ref.ModelCallID)
		default:
			seen[ref.ModelCallID] = at
			canonical(ModelCallData(ref.ModelCallID))
		}
	case delegation.EventSummarization:
		if !k.messages[ref.SummaryMessageID] {
			k.add(f+".data.summary_message_id", "message %q is not in messages", ref.SummaryMessageID)
		}
	case delegation.EventAgentStarted:
		if !k.agents[ref.Agent.ID] {
			k.add(f+".data.agent.id", "agent %q is not in agents", ref.Agent.ID)
		} else {
			k.pos.AgentSeq[ref.Agent.ID] = ev.Seq
		}
	}
}

// covered checks that every agent, message and call has its event.
func (k *checker) covered(t *Trace) {
	for i, a := range t.Agents {
		if _, ok := k.pos.AgentSeq[a.ID]; !ok && k.agents[a.ID] {
			k.add(fmt.Sprintf("k.agents[%d]", i), "agent %q has no agent.started event", a.ID)
		}
	}
	for i, m := range t.Messages {
		if _, ok := k.pos.Message[m.ID]; !ok {
			k.add(fmt.Sprintf("k.messages[%d]", i), "message %q has no message.added event", m.ID)
		}
	}
	for i, c := range t.ModelCalls {
		if _, ok := k.pos.Call[c.ID]; !ok {
			k.add(fmt.Sprintf("model_calls[%d]", i), "model call %q has no model.started event", c.ID)
		}
	}
}
