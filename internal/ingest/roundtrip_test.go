package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/trace"
)

// shape is what two equivalent sessions share: each agent (name, parent's
// name, mode, status), each agent's message list, and what every model
// call received, message by message, with its system prompt; receipts,
// files, the answer.
func shape(t *trace.Trace) string {
	var b strings.Builder
	names := map[string]string{}
	for _, a := range t.Agents {
		names[a.ID] = a.Name
	}
	msg := func(m trace.Message) string {
		var calls []string
		for _, c := range m.ToolCalls {
			var v any
			_ = json.Unmarshal(c.Args, &v)
			args, _ := json.Marshal(v)
			calls = append(calls, c.Name+string(args))
		}
		return fmt.Sprintf("%s/%s %q %v", m.Role, m.Kind, m.Content, calls)
	}
	fmt.Fprintf(&b, "session %s: %q → %q\n", t.Session.Status, t.Session.Prompt, answerOf(t))
	// Agents and calls by name: a received child starts when its first call
	// arrives, which need not be in tool-call order.
	agents := append([]trace.Agent(nil), t.Agents...)
	sort.SliceStable(agents, func(i, j int) bool { return agents[i].Name < agents[j].Name })
	calls := append([]trace.ModelCall(nil), t.ModelCalls...)
	sort.SliceStable(calls, func(i, j int) bool {
		if names[calls[i].AgentID] != names[calls[j].AgentID] {
			return names[calls[i].AgentID] < names[calls[j].AgentID]
		}
		return calls[i].Index < calls[j].Index
	})
	for _, a := range agents {
		parent := "-"
		if a.ParentID != nil {
			parent = names[*a.ParentID]
		}
		fmt.Fprintf(&b, "agent %s parent=%s mode=%s status=%s\n", a.Name, parent, deref(a.Mode), a.Status)
	}
	lists := trace.Lists(t)
	for _, a := range agents {
		for _, m := range lists[a.ID] {
			fmt.Fprintf(&b, "  %s: %s\n", a.Name, msg(m))
		}
	}
	for _, c := range calls {
		fmt.Fprintf(&b, "call %s #%d system=%q\n", names[c.AgentID], c.Index, c.SystemPrompt)
		for _, r := range c.Context {
			fmt.Fprintf(&b, "    from %s %d…%d\n", names[r.AgentID], r.From, r.To)
		}
	}
	fmt.Fprintf(&b, "files %v\n", t.Files)
	return b.String()
}

func nameOf(t *trace.Trace, agentID string) string {
	for _, a := range t.Agents {
		if a.ID == agentID {
			return a.Name
		}
	}
	return ""
}

// idOf finds the call of agent name + index in t.
func idOf(t *trace.Trace, nameIndex string) string {
	for _, c := range t.ModelCalls {
		if nameOf(t, c.AgentID)+fmt.Sprint(c.Index) == nameIndex {
			return c.ID
		}
	}
	return ""
}

func answerOf(t *trace.Trace) string {
	for _, a := range t.Agents {
		if a.ParentID == nil {
			for i := len(t.Messages) - 1; i >= 0; i-- {
				if m := t.Messages[i]; m.AgentID == a.ID && m.Role == "assistant" && m.Content != "" {
					return m.Content
				}
			}
		}
	}
	return ""
}

// strip removes from an OTLP JSON document every span attribute whose key
// starts with prefix: what an exporter of the other convention would not
// write.
func strip(t *testing.T, doc []byte, prefixes ...string) []byte {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	for _, rs := range d["resourceSpans"].([]any) {
		for _, ss := range rs.(map[string]any)["scopeSpans"].([]any) {
			for _, sp := range ss.(map[string]any)["spans"].([]any) {
				s := sp.(map[string]any)
				var kept []any
				for _, a := range s["attributes"].([]any) {
					k := a.(map[string]any)["key"].(string)
					drop := false
					for _, p := range prefixes {
						drop = drop || strings.HasPrefix(k, p)
					}
					if !drop {
						kept = append(kept, a)
					}
				}
				s["attributes"] = kept
			}
		}
	}
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOwnExportRoundTrips: a session our engine ran, exported as OTLP
// (linear GenAI spans: each call's new messages and its ranges) and received
// back, is the same session; and so it is exported with whole inputs, as
// another exporter writes them, read through either convention alone.
func TestOwnExportRoundTrips(t *testing.T) {
	l, err := lessons.Get("received-deepagents")
	if err != nil {
		t.Fatal(err)
	}
	orig, err := l.Variants[0].Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := otlp.Export(orig)
	if err != nil {
		t.Fatal(err)
	}
	// Another exporter writes each call's whole input, in one convention.
	var whole bytes.Buffer
	if _, err := otlp.WriteJSON(&whole, trace.SourceOf(orig), otlp.Options{Inputs: otlp.InputsFull, OpenInference: true}); err != nil {
		t.Fatal(err)
	}
	want := shape(orig)
	for _, tc := range []struct {
		name, convention string
		doc              []byte
	}{
		{"as exported", ingest.ConventionGenAI, doc},
		{"GenAI spans alone", ingest.ConventionGenAI, strip(t, whole.Bytes(), "openinference.", "llm.", "input.", "output.", "tool.", "delegation.")},
		{"OpenInference spans alone", ingest.ConventionOpenInference, strip(t, whole.Bytes(), "gen_ai.", "delegation.")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td, err := ingest.DecodeJSON(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			spans := only(t, ingest.Group(td))
			// As a file is imported (all at once), and as an exporter sends
			// them (one at a time, as they end).
			byEnd := append([]ingest.Span(nil), spans...)
			sort.SliceStable(byEnd, func(i, j int) bool { return byEnd[i].End.Before(byEnd[j].End) })
			for _, feed := range []struct {
				spans []ingest.Span
				n     int
			}{{spans, len(spans)}, {byEnd, 1}} {
				sink, _ := assemble(feed.spans, feed.n)
				got := sink.build(t)
				if g := shape(got); g != want {
					t.Errorf("received back (%d at a time):\n%s\nran:\n%s", feed.n, g, want)
				}
				if got.Session.Origin.Convention != tc.convention {
					t.Errorf("read as %s, want %s", got.Session.Origin.Convention, tc.convention)
				}
				if tc.name == "as exported" {
					reExportsAsReceived(t, got)
				}
				// Tokens: the export reports our count; with its delegation.*
				// attributes it comes back as our count again (a scripted
				// model reported none), without them as reported usage.
				ours := map[string]int{}
				for _, c := range orig.ModelCalls {
					ours[c.ID] = c.InputTokens
				}
				for _, c := range got.ModelCalls {
					id := nameOf(got, c.AgentID) + fmt.Sprint(c.Index)
					want := ours[idOf(orig, id)]
					switch {
					case tc.name == "as exported":
						if c.Usage != nil || c.InputTokens != want {
							t.Errorf("call %s: %d tokens, reported %+v; ours was %d, none reported", id, c.InputTokens, c.Usage, want)
						}
					case c.Usage == nil || c.Usage.PromptTokens != want:
						t.Errorf("call %s: reported %+v, ours was %d", id, c.Usage, want)
					}
				}
			}
		})
	}
}

// reExportsAsReceived: a session received from our own export of a
// scripted run names the provider its spans said (scripted), but exported
// again it names none ("unknown": our engine made none of its calls) and
// carries no usage (no endpoint reported any, and the count is not ours);
// received back once more, it is the same session, our counts and no
// usage still.
func reExportsAsReceived(t *testing.T, got *trace.Trace) {
	t.Helper()
	if p := got.Session.Origin.Provider; p != "scripted" {
		t.Errorf("received from a scripted export: provider %q", p)
	}
	doc, err := otlp.Export(got)
	if err != nil {
		t.Fatal(err)
	}
	td, err := ingest.DecodeJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	spans := only(t, ingest.Group(td))
	for _, sp := range spans {
		if p, ok := sp.Attrs["gen_ai.provider.name"]; ok && p != "unknown" {
			t.Errorf("re-exported span %s names provider %v", sp.Name, p)
		}
		if _, ok := sp.Attrs["gen_ai.usage.input_tokens"]; ok {
			t.Errorf("re-exported span %s reports usage", sp.Name)
		}
	}
	sink, _ := assemble(spans, len(spans))
	back := sink.build(t)
	if g, w := shape(back), shape(got); g != w {
		t.Errorf("received back again:\n%s\nreceived:\n%s", g, w)
	}
	received := map[string]int{}
	for _, c := range got.ModelCalls {
		received[nameOf(got, c.AgentID)+fmt.Sprint(c.Index)] = c.InputTokens
	}
	for _, c := range back.ModelCalls {
		id := nameOf(back, c.AgentID) + fmt.Sprint(c.Index)
		if c.Usage != nil || c.InputTokens != received[id] {
			t.Errorf("call %s: %d tokens, reported %+v; received %d, none reported", id, c.InputTokens, c.Usage, received[id])
		}
	}
}
