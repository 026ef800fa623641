package trace_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// exported is the example session's trace as export writes it, as a map to
// edit.
func exported(t *testing.T) map[string]any {
	t.Helper()
	sc, events := runExample(t)
	tr, err := trace.Build(trace.Meta{ID: "s1", Scenario: sc.Raw}, events)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(tr)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func parseErrors(t *testing.T, m map[string]any) delegation.FieldErrors {
	t.Helper()
	b, _ := json.Marshal(m)
	_, _, err := trace.Parse(b)
	var e *delegation.Error
	if err == nil {
		t.Fatal("the trace was accepted")
	}
	if !strings.Contains(err.Error(), "not valid") || !asError(err, &e) {
		t.Fatalf("err = %v", err)
	}
	return e.Fields
}

func scan(s, format string, v *int) bool {
	_, err := fmt.Sscanf(s, format, v)
	return err == nil
}

func asError(err error, e **delegation.Error) bool {
	x, ok := err.(*delegation.Error)
	*e = x
	return ok
}

// Finding 9 of issue 21: an import could claim to be running, forever, or
// give its events seqs such as 2^63-1.
func TestImportCannotClaimTheImpossible(t *testing.T) {
	t.Run("what export writes is accepted", func(t *testing.T) {
		b, _ := json.Marshal(exported(t))
		if _, _, err := trace.Parse(b); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a running session is refused", func(t *testing.T) {
		m := exported(t)
		m["session"].(map[string]any)["status"] = "running"
		fe := parseErrors(t, m)
		if len(fe) != 1 || fe[0].Field != "session.status" || !strings.Contains(fe[0].Message, `"interrupted"`) {
			t.Fatalf("errors = %v", fe)
		}
	})
	t.Run("a seq of 2^63-1 is refused", func(t *testing.T) {
		m := exported(t)
		ev := m["events"].([]any)
		ev[len(ev)-1].(map[string]any)["seq"] = int64(1<<63 - 1)
		fe := parseErrors(t, m)
		if fe[0].Field != "events[28].seq" || !strings.Contains(fe[0].Message, "by one from 1") {
			t.Fatalf("errors = %v", fe)
		}
	})
	t.Run("events that do not start at 1 are refused", func(t *testing.T) {
		m := exported(t)
		for _, e := range m["events"].([]any) {
			e.(map[string]any)["seq"] = e.(map[string]any)["seq"].(float64) + 10
		}
		if fe := parseErrors(t, m); fe[0].Field != "events[0].seq" {
			t.Fatalf("errors = %v", fe)
		}
	})
	t.Run("ids that are not safe in a URL or a page are refused", func(t *testing.T) {
		for _, id := range []string{"a/b", `x"],[y`, "a b", ""} {
			m := exported(t)
			m["agents"].([]any)[1].(map[string]any)["id"] = id
			fe := parseErrors(t, m)
			if fe[0].Field != "agents[1].id" {
				t.Fatalf("id %q: errors = %v", id, fe)
			}
		}
	})
	t.Run("a trace made of errors gets 50 of them and a count", func(t *testing.T) {
		m := exported(t)
		msgs := m["messages"].([]any)
		for range 500 {
			msgs = append(msgs, msgs[0]) // each a duplicate id, with no message.added
		}
		m["messages"] = msgs
		b, _ := json.Marshal(m)
		_, _, err := trace.Parse(b)
		var e *delegation.Error
		if !asError(err, &e) || len(e.Fields) != delegation.MaxFieldErrors+1 {
			t.Fatalf("err = %v", err)
		}
		var more int
		if last := e.Fields[len(e.Fields)-1]; last.Field != "" || !scan(last.Message, "and %d more problems", &more) || more < 950 {
			t.Fatalf("last entry %v", last)
		}
		if want := fmt.Sprintf("(and %d more problems)", delegation.MaxFieldErrors+more-1); !strings.HasSuffix(err.Error(), want) {
			t.Fatalf("message %q; want it to end %q", err.Error(), want)
		}
	})
}
