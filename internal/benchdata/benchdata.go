// Package benchdata makes the scenario the benchmarks share, so the engine,
// the server and the binary are measured on the same work.
package benchdata

import (
	"encoding/json"
	"fmt"
	"strings"
)

// LongScenario is the scenario of the engine benchmark: a main agent of
// mainSteps tool-call steps (writing, reading and searching notes) whose
// last step delegates to a general-purpose child of childSteps steps,
// scripted and instant.
func LongScenario(mainSteps, childSteps int) []byte {
	turn := func(i int, who string) map[string]any {
		var call map[string]any
		switch i % 3 {
		case 0:
			call = map[string]any{"name": "write_file", "args": map[string]any{
				"file_path": fmt.Sprintf("/%s/notes-%d.md", who, i),
				"content":   fmt.Sprintf("Step %d: the parser reads the header, then the body; the checksum of block %d is 0x%x.", i, i, i*7919)}}
		case 1:
			call = map[string]any{"name": "read_file", "args": map[string]any{"file_path": fmt.Sprintf("/%s/notes-%d.md", who, i-1)}}
		default:
			call = map[string]any{"name": "grep", "args": map[string]any{"pattern": "checksum", "path": "/" + who, "output_mode": "count"}}
		}
		return map[string]any{"content": fmt.Sprintf("Looking at step %d.", i), "tool_calls": []any{call}}
	}
	noSummary := map[string]any{"max_tokens": 1 << 40}
	var main, child []any
	for i := 0; i < mainSteps-1; i++ {
		main = append(main, turn(i, "main"))
	}
	main = append(main,
		map[string]any{"tool_calls": []any{map[string]any{"name": "task", "args": map[string]any{
			"description": "Summarize every checksum in /main and report the largest.", "subagent_type": "general-purpose"}}}},
		map[string]any{"content": "The helper reported the largest checksum."})
	for i := 0; i < childSteps-1; i++ {
		child = append(child, turn(i, "child"))
	}
	child = append(child, map[string]any{"content": "The largest checksum is 0x1792f."})
	doc, err := json.Marshal(map[string]any{
		"name": "bench", "prompt": "Work through the notes, then delegate the summary.",
		// Summarization is always on (170,000 tokens); the benchmarks measure
		// how the cost of a step grows with the history, so it is set out of
		// reach, for every agent.
		"agent": map[string]any{"max_steps": mainSteps + 10, "summarization": noSummary},
		"subagents": []any{map[string]any{"name": "general-purpose", "description": "Does the work.", "max_steps": childSteps + 10,
			"summarization": noSummary}},
		"script": map[string]any{"main": main, "general-purpose": []any{child}},
	})
	if err != nil {
		panic(err) // plain maps of strings and numbers always encode
	}
	return doc
}

// Messages is a scenario of about n messages: a main agent's write_file
// turns (an assistant message and its tool result each), then a fork
// child, so there is a delegation to show and to export.
func Messages(n int) []byte {
	turns := max(n/2-2, 1)
	var main []any
	for i := 0; i < turns; i++ {
		main = append(main, map[string]any{"content": fmt.Sprintf("Turn %d: reading the next file.", i),
			"tool_calls": []any{map[string]any{"name": "write_file", "args": map[string]any{
				"file_path": fmt.Sprintf("/n/%06d.md", i), "content": fmt.Sprintf("Finding %d: the handler skips the expiry check.", i)}}}})
	}
	main = append(main, map[string]any{"tool_calls": []any{map[string]any{"name": "task",
		"args": map[string]any{"description": "Summarize the findings above.", "subagent_type": "fk"}}}},
		map[string]any{"content": "Done."})
	doc, err := json.Marshal(map[string]any{"name": "big", "prompt": "Audit everything.",
		"agent":     map[string]any{"max_steps": turns + 10},
		"subagents": []any{map[string]any{"name": "fk", "description": "Summarizes.", "mode": "fork"}},
		"script":    map[string]any{"main": main, "fk": []any{[]any{map[string]any{"content": "Every handler skips it."}}}}})
	if err != nil {
		panic(err) // plain maps of strings and numbers always encode
	}
	return doc
}

// TurnsScenario is a main agent of n tool-call turns (a note written, then
// read back), each thinking delayMS first (the first firstMS), whose last
// turn delegates to a fork child of two turns: the scenario of the storage
// and live-page benchmarks.
func TurnsScenario(n, delayMS, firstMS int) []byte {
	var main []any
	for i := 0; i < n; i++ {
		var call map[string]any
		if i%2 == 0 {
			call = map[string]any{"name": "write_file", "args": map[string]any{"file_path": fmt.Sprintf("/notes/%05d.md", i),
				"content": fmt.Sprintf("Finding %d: the request handler at line %d does not check the token's expiry.", i, 40+i)}}
		} else {
			call = map[string]any{"name": "read_file", "args": map[string]any{"file_path": fmt.Sprintf("/notes/%05d.md", i-1)}}
		}
		turn := map[string]any{"content": fmt.Sprintf("Turn %d.", i), "tool_calls": []any{call}}
		d := delayMS
		if i == 0 {
			d = firstMS
		}
		if d > 0 {
			turn["delay_ms"] = d
		}
		main = append(main, turn)
	}
	main = append(main,
		map[string]any{"tool_calls": []any{map[string]any{"name": "task", "args": map[string]any{"description": "Summarize the findings above.", "subagent_type": "summarizer"}}}, "delay_ms": delayMS},
		map[string]any{"content": "Done.", "delay_ms": delayMS})
	doc, err := json.Marshal(map[string]any{
		"name": "long", "prompt": "Audit the handler.",
		"agent":     map[string]any{"max_steps": n + 10},
		"subagents": []any{map[string]any{"name": "summarizer", "description": "Summarizes.", "mode": "fork"}},
		"script": map[string]any{"main": main, "summarizer": []any{[]any{
			map[string]any{"tool_calls": []any{map[string]any{"name": "ls", "args": map[string]any{"path": "/notes"}}}, "delay_ms": delayMS},
			map[string]any{"content": "Every handler skips the expiry check.", "delay_ms": delayMS}}}},
	})
	if err != nil {
		panic(err) // plain maps of strings and numbers always encode
	}
	return doc
}

// FanOut is a main agent that works through `steps` tool-call turns, then
// sends `children` tasks in one message, each child a tool call and an
// answer, then answers: the session page of a big delegation.
func FanOut(steps, children int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"name": "fan-out-%d", "prompt": "Study the payments service, part by part.",
 "agent": {"max_steps": %d, "max_concurrency": %d},
 "subagents": [{"name": "researcher", "description": "Researches one part."}],
 "script": {"main": [`, children, steps+10, children+1)
	for i := range steps {
		fmt.Fprintf(&b, `{"content": "Looking at module %d.", "tool_calls": [{"name": "ls", "args": {"path": "/"}}]},`, i)
	}
	b.WriteString(`{"content": "All at once.", "tool_calls": [`)
	for i := range children {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name": "task", "args": {"description": "Research part %d of the payments service and report in one line.", "subagent_type": "researcher"}}`, i)
	}
	b.WriteString(`]}, {"content": "Done."}], "researcher": [`)
	for i := range children {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `[{"tool_calls": [{"name": "ls", "args": {"path": "/"}}]}, {"content": "Part %d: fine."}]`, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}
