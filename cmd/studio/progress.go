package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/mattn/go-isatty"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/view"
)

// isTerminal reports whether w is a terminal, where progress is for a person.
func isTerminal(w io.Writer) bool {
	if s, ok := w.(*safeWriter); ok {
		w = s.w // what it writes to
	}
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// progress tells a person at a terminal what a running session does: agents
// starting and finishing, each model call, retries, and with verbose the
// text the models stream, a line at a time per call. It reads the session's
// events: it is the run's Publisher (with --db) or part of its Sink.
type progress struct {
	w       io.Writer
	on      bool
	verbose bool
	start   time.Time

	mu     sync.Mutex
	names  map[string]string // agent id -> name
	text   map[string]*strings.Builder
	order  []string // model calls with streamed text not yet printed, in order
	closed bool
}

var _ session.Publisher = (*progress)(nil)

func newProgress(w io.Writer, verbose, on bool) *progress {
	return &progress{w: w, on: on, verbose: verbose, start: time.Now(), names: map[string]string{},
		text: map[string]*strings.Builder{}}
}

// Publish takes a batch of the session's events (or a live-only one).
func (p *progress) Publish(_ string, events []delegation.Event, _ view.Changes, _ *session.Live) {
	for _, ev := range events {
		p.event(ev)
	}
}

// event takes one event of the session.
func (p *progress) event(ev delegation.Event) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	switch ev.Type {
	case delegation.EventAgentStarted:
		var d delegation.AgentStarted
		if payload(ev, &d) {
			p.names[d.Agent.ID] = d.Agent.Name
			if d.Agent.ParentID == "" {
				p.line("%s started", d.Agent.Name)
			}
		}
	case delegation.EventDelegationStarted:
		var d delegation.DelegationStarted
		if payload(ev, &d) {
			p.line("%s → %s [%s]: %s", p.name(ev.AgentID), d.SubagentType, d.Mode, quote(d.Description, 70))
		}
	case delegation.EventDelegationRefused:
		var d delegation.DelegationRefused
		if payload(ev, &d) {
			p.line("%s → %s refused (%s)", p.name(ev.AgentID), d.SubagentType, d.Reason)
		}
	case delegation.EventModelDelta:
		var d delegation.ModelDelta
		if p.verbose && payload(ev, &d) {
			p.stream(ev.AgentID, d.ModelCallID, d.Text)
		}
	case delegation.EventModelRetry:
		var d delegation.ModelRetry
		if payload(ev, &d) {
			p.line("  %s · call %d: %s; retry %d of %d in %s", p.name(ev.AgentID), callNumber(d.ModelCallID),
				printable(d.Error), d.Attempt, d.Attempts-1, (time.Duration(d.WaitMS) * time.Millisecond).Round(10*time.Millisecond))
		}
	case delegation.EventModelFinished:
		var d delegation.ModelFinished
		if payload(ev, &d) {
			p.flush(ev.AgentID, d.ModelCallID)
			what := fmt.Sprintf("%s out", thousands(d.OutputTokens))
			if d.Error != "" {
				what = "failed: " + quote(d.Error, 160)
			}
			p.line("  %s · call %d · %s · %s", p.name(ev.AgentID), callNumber(d.ModelCallID), what,
				(time.Duration(d.DurationMS) * time.Millisecond).Round(time.Millisecond))
		}
	case delegation.EventAgentFinished:
		var d delegation.AgentFinished
		if payload(ev, &d) {
			out, status := quote(d.Receipt, 70), d.Status
			switch {
			case d.StoppedBy != "":
				out, status = stopWords(d.StoppedBy), delegation.StatusInterrupted
			case d.Status != delegation.StatusDone:
				out = quote(d.Error, 120)
			}
			p.line("%s %s after %s: %s", p.name(ev.AgentID), status, plural(d.Steps, "step"), out)
		}
	}
}

// Close prints what streamed text is left and stops printing.
func (p *progress) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range append([]string(nil), p.order...) {
		p.flush("", id)
	}
	p.closed = true
}

// callNumber is a model call's number in its agent, from 1, read from its
// id ("main.c0" is main's first): live events (a retry) may arrive before
// the stored model.started that says it.
func callNumber(id string) int {
	i := strings.LastIndex(id, ".c")
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(id[i+2:])
	if err != nil {
		return 0
	}
	return n + 1
}

func (p *progress) name(agentID string) string {
	if n := p.names[agentID]; n != "" {
		return n
	}
	return agentID
}

// line prints one line, stamped with the time since the run began.
func (p *progress) line(format string, args ...any) {
	fmt.Fprintf(p.w, "%6.1fs  %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// stream keeps a call's streamed text and prints each line it completes;
// siblings stream at once, so each line names its agent.
func (p *progress) stream(agentID, callID, text string) {
	b := p.text[callID]
	if b == nil {
		b = new(strings.Builder)
		p.text[callID] = b
		p.order = append(p.order, callID)
	}
	b.WriteString(text)
	s := b.String()
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		p.line("    %s │ %s", p.name(agentID), printable(s[:i]))
		s = s[i+1:]
	}
	b.Reset()
	b.WriteString(s)
}

// flush prints the rest of a call's streamed text.
func (p *progress) flush(agentID, callID string) {
	b := p.text[callID]
	if b == nil {
		return
	}
	if rest := b.String(); strings.TrimSpace(rest) != "" {
		if agentID == "" {
			agentID = strings.SplitN(callID, ".c", 2)[0]
		}
		p.line("    %s │ %s", p.name(agentID), printable(rest))
	}
	delete(p.text, callID)
	for i, id := range p.order {
		if id == callID {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
}

// payload reads an event's data into out.
func payload[T any](ev delegation.Event, out *T) bool {
	v, err := delegation.DataAs[T](ev)
	*out = v
	return err == nil
}

// quote is s on one line, shortened, quoted: %q escapes control
// characters, so it is safe for a terminal.
func quote(s string, n int) string {
	return fmt.Sprintf("%q", view.Excerpt(s, n))
}

// printable makes text a model or an endpoint wrote safe to print on a
// terminal: control characters (escape sequences among them, which could
// move the cursor or retitle the window) are shown as \xNN instead.
func printable(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			fmt.Fprintf(&b, `\x%02x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isControl(r rune) bool { return r != '\t' && unicode.IsControl(r) }
