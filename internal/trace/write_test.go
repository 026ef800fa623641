package trace_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"iter"
	"reflect"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

func TestWrite(t *testing.T) {
	sc, events := runExample(t)
	tr, err := trace.Build(trace.Meta{ID: "s1", Scenario: sc.Raw}, events)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("compact: the bytes of json.Marshal", func(t *testing.T) {
		var b bytes.Buffer
		if err := trace.Write(&b, trace.SourceOf(tr), false); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(tr)
		if got := b.String(); got != string(want)+"\n" {
			t.Fatalf("streamed:\n%s\nwhole:\n%s", got, want)
		}
	})
	t.Run("pretty: the bytes of json.MarshalIndent", func(t *testing.T) {
		var b bytes.Buffer
		if err := trace.Write(&b, trace.SourceOf(tr), true); err != nil {
			t.Fatal(err)
		}
		want, _ := json.MarshalIndent(tr, "", "  ")
		if got := b.String(); got != string(want)+"\n" {
			t.Fatalf("streamed:\n%s\nwhole:\n%s", got, want)
		}
	})
	t.Run("empty parts are written as json.Marshal writes them", func(t *testing.T) {
		empty := &trace.Trace{Format: trace.Format, Version: trace.Version, Scenario: json.RawMessage(`{}`),
			Agents: []trace.Agent{}, Messages: []trace.Message{}, ModelCalls: []trace.ModelCall{},
			Events: []delegation.Event{}, Files: map[string]string{}}
		for _, pretty := range []bool{false, true} {
			var b bytes.Buffer
			if err := trace.Write(&b, trace.SourceOf(empty), pretty); err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(empty)
			if pretty {
				want, _ = json.MarshalIndent(empty, "", "  ")
			}
			if b.String() != string(want)+"\n" {
				t.Fatalf("pretty=%v:\n%s\nwant\n%s", pretty, b.String(), want)
			}
		}
	})
	t.Run("event data in any form is written as json.Marshal writes it", func(t *testing.T) {
		odd := *tr
		odd.Events = append([]delegation.Event(nil), tr.Events...)
		for i, data := range []string{
			`{ "a": 1 }`, `{"html":"<b>&</b>"}`, "{\"line\":\"\u2028\"}", `{"quote":"say \"hi\" \\ bye"}`, `{"text":"a\nb"}`,
		} {
			odd.Events = append(odd.Events, delegation.Event{Seq: int64(1000 + i), Type: "note", At: tr.Events[0].At, Data: json.RawMessage(data)})
		}
		odd.Files = map[string]string{"/a<b>.md": "tab\there \"q\" \\ <&> \u2028 \x01 \xff end", "/plain.md": "héllo"}
		var b bytes.Buffer
		if err := trace.Write(&b, trace.SourceOf(&odd), false); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(&odd)
		if b.String() != string(want)+"\n" {
			t.Fatalf("streamed:\n%s\nwhole:\n%s", b.String(), want)
		}
	})
	t.Run("a part that fails stops the writing with its error", func(t *testing.T) {
		boom := errors.New("the disk went away")
		err := trace.Write(&bytes.Buffer{}, failing{trace.SourceOf(tr), boom}, false)
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("the log with what each event introduced gives the trace back", func(t *testing.T) {
		b := trace.NewBuilder(trace.Meta{ID: "s1", Scenario: sc.Raw})
		for sp, err := range trace.SourceOf(tr).Log() {
			if err != nil {
				t.Fatal(err)
			}
			ev := sp.Event
			switch {
			case sp.Message != nil:
				m := *sp.Message
				ev.Payload, ev.Data = delegation.MessageAdded{Index: sp.Index, Message: &delegation.Message{ID: m.ID, AgentID: m.AgentID,
					Role: delegation.Role(m.Role), Content: m.Content, ToolCalls: m.ToolCalls, IsError: m.IsError, Tokens: m.Tokens,
					Kind: delegation.Kind(m.Kind), ToolCallID: deref(m.ToolCallID)}}, nil
			case sp.Call != nil:
				c := sp.Call
				ev.Payload, ev.Data = delegation.ModelStarted{Call: c.Domain()}, nil
			case sp.Finished != nil:
				ev.Payload, ev.Data = *sp.Finished, nil
			}
			if _, err := b.Add(ev); err != nil {
				t.Fatal(err)
			}
		}
		again := b.Trace()
		again.Files = tr.Files // the log's session.finished holds no files: the trace does
		if !reflect.DeepEqual(mustJSON(t, again), mustJSON(t, tr)) {
			t.Fatalf("rebuilt:\n%s\nwant\n%s", mustJSON(t, again), mustJSON(t, tr))
		}
	})
	t.Run("backward reads an agent's list newest first", func(t *testing.T) {
		var got []string
		for m, err := range trace.SourceOf(tr).Backward("main", 1, 4) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m.ID)
		}
		if want := []string{"main.3", "main.2", "main.1"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// failing is a source whose messages fail after the first.
type failing struct {
	*trace.Memory
	err error
}

func (f failing) Messages() iter.Seq2[trace.Message, error] {
	return func(yield func(trace.Message, error) bool) {
		for m := range f.Memory.Messages() {
			if !yield(m, nil) {
				return
			}
			yield(trace.Message{}, f.err)
			return
		}
	}
}

// A JSON string written in pieces, however they are cut, is what
// json.Marshal writes of the whole.
func TestJSONStringWriterInPieces(t *testing.T) {
	for _, s := range []string{"", "plain <a> & \"q\" \\ \n\r\t\x01", "é日本\u2028\u2029😀", string([]byte{0xff, 'a', 0xe6, 0x97}), "end in part \xe6\x97"} {
		want, _ := json.Marshal(s)
		for cut := 1; cut <= 5; cut++ {
			var b strings.Builder
			b.WriteString(`"`)
			w := &trace.JSONStringWriter{W: &b}
			for i := 0; i < len(s); i += cut {
				if _, err := w.WriteString(s[i:min(i+cut, len(s))]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			b.WriteString(`"`)
			if b.String() != string(want) {
				t.Errorf("%q in pieces of %d: %s, want %s", s, cut, b.String(), want)
			}
		}
	}
}
