package tokens

import (
	"encoding/json"
	"testing"
)

// The reprs below are Python 3.11's, of json.loads of each argument text.
func TestPythonToolCallsAsPythonWritesThem(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{`{"description": "把刚才那个订单号报给我", "subagent_type": "general-purpose"}`,
			`[{'name': 'task', 'args': {'description': '把刚才那个订单号报给我', 'subagent_type': 'general-purpose'}, 'id': 'call_1', 'type': 'tool_call'}]`},
		{`{"a": [1, 2.5, 1e-05, 1e16, 0.82, 1.0, true, false, null], "b": {"c": "it's"}, "d": "say \"hi\"\n\t\u0001é"}`,
			`[{'name': 'task', 'args': {'a': [1, 2.5, 1e-05, 1e+16, 0.82, 1.0, True, False, None], 'b': {'c': "it's"}, 'd': 'say "hi"\n\t\x01é'}, 'id': 'call_1', 'type': 'tool_call'}]`},
		{`{"x": 123456789012345678901234567890, "y": 100.0, "z": -0.0, "w": 1e300, "v": "😀\u200b"}`,
			`[{'name': 'task', 'args': {'x': 123456789012345678901234567890, 'y': 100.0, 'z': -0.0, 'w': 1e+300, 'v': '😀\u200b'}, 'id': 'call_1', 'type': 'tool_call'}]`},
		{`{}`, `[{'name': 'task', 'args': {}, 'id': 'call_1', 'type': 'tool_call'}]`},
	} {
		got := PythonToolCalls([]LangChainToolCall{{Name: "task", ID: "call_1", Args: json.RawMessage(c.args)}})
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.args, got, c.want)
		}
	}
}

// The articles' figures, counted as LangChain counts them.
func TestCountLangChainIsTheArticlesCount(t *testing.T) {
	// Article 2 §2: the isolated child opens with two messages, 12 tokens:
	// its (empty) system prompt and the task "把刚才那个订单号报给我".
	if got := CountLangChain(LangChainMessage{Role: "system"}, LangChainMessage{Role: "user", Content: "把刚才那个订单号报给我"}); got != 12 {
		t.Errorf("the isolated child's opening: %d tokens; the article counted 12", got)
	}
	// count_tokens_approximately([AIMessage("", tool_calls=[...])]) and a
	// ToolMessage, as Python 3.11 with langchain_core computes them.
	ai := LangChainMessage{Role: "assistant", ToolCalls: []LangChainToolCall{{Name: "task", ID: "call_1",
		Args: json.RawMessage(`{"description": "把刚才那个订单号报给我", "subagent_type": "general-purpose"}`)}}}
	if got := CountLangChain(ai); got != 38 { // 131 characters of repr + 9 of role → 35, + 3
		t.Errorf("the task call: %d tokens, want 38", got)
	}
	tool := LangChainMessage{Role: "tool", Content: "子 Agent 的最终报告：结论是 42。", ToolCallID: "call_1"}
	if got := CountLangChain(tool); got != 11 { // 21 + 6 + 4 = 31 → 8, + 3
		t.Errorf("the receipt: %d tokens, want 11", got)
	}
	if got := CountLangChain(ai, tool); got != 49 {
		t.Errorf("both: %d, want 49 (each message rounded up on its own)", got)
	}
}
