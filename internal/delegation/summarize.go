package delegation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// maybeSummarize replaces the head of an agent's history with a summary when
// its next call reaches the agent's own token threshold (delegation.md §7):
// deepagents counts the system prompt, the tools and the effective messages
// (middleware/summarization.py:1375) and triggers when the count reaches the
// threshold, `>=` (deepagentsjs src/middleware/summarization.ts:483; the
// Python middleware defers to langchain's, summarization.py:632). The
// summary is asked for inside the model step, so it uses none of the
// agent's max_steps. Nothing is deleted: the
// summary is a new message of the agent's list, the folded messages stay in
// their lists, and their text is written to the agent's history file
// (HistoryPath). The cut never separates a tool call
// from its results. A fork child later inherits this effective history.
func (e *Engine) maybeSummarize(ctx context.Context, a *agent) error {
	cfg := a.summary
	if cfg.MaxTokens <= 0 {
		return nil
	}
	msgTokens, _ := a.tokensOf(a.history)
	before := a.systemTokens + a.toolTokens + msgTokens
	if before < cfg.MaxTokens {
		return nil
	}
	refs := a.refs()
	cut := len(refs) - cfg.KeepMessages
	// Keep a tool result with the assistant message that called it.
	for cut > 0 && cut < len(refs) && refs[cut].msg.Role == RoleTool {
		cut--
	}
	if cut <= 0 || (cut == 1 && refs[0].msg.Kind == KindSummary) {
		return nil // nothing new to fold
	}
	folded := rangesOf(refs[:cut])
	resp, _, err := e.callModel(ctx, a, PurposeSummary, folded)
	if err != nil {
		return fmt.Errorf("summarize: %w", err)
	}

	filePath := HistoryPath(e.team.Main.Compat, e.cfg.SessionID, a.info.ID)
	var doc strings.Builder
	if old, ok := a.ws.files[filePath]; ok {
		doc.WriteString(old)
		doc.WriteString("\n")
	}
	a.summaries++
	WriteHistoryHead(&doc, a.summaries, a.info.ID)
	for _, r := range refs[:cut] {
		WriteHistoryMessage(&doc, r.msg)
	}
	a.ws.write(filePath, doc.String())
	e.emitFileChanges(a, "")

	kept := rangesOf(refs[cut:])
	cutoff := a.rawIndex(refs[cut])
	summary := &Message{Role: RoleUser, Kind: KindSummary, Content: fmt.Sprintf(
		"[Summary of the conversation so far. The full earlier history is in %s.]\n\n%s", filePath, resp.Content)}
	a.history = nil
	e.appendMessage(a, summary) // becomes the history's first range
	a.history = append(a.history, kept...)
	after, _ := a.tokensOf(a.history)
	e.emit(a.info.ID, EventSummarization, Summarized{CutoffIndex: cutoff, SummaryMessage: summary,
		FilePath: filePath, FoldedMessages: cut, TokensBefore: before,
		TokensAfter: a.systemTokens + a.toolTokens + after})
	return nil
}

// HistoryPath is the file an agent's summarized history is written to.
// Ours names the agent: /conversation_history/<agent id>.md. Under compat it
// is deepagents JS's name, /conversation_history/session_<8 hex digits>.md
// (src/middleware/summarization.ts:400, :410): there the digits are the
// head of a random UUID, drawn once per middleware (kept in the thread's
// state, :1178) and anew for each task call's child (subagents.ts:885);
// here they are the head of the SHA-256 of the session's and the agent's
// ids, so one agent keeps one file and a run repeats its names.
func HistoryPath(compat Compat, sessionID, agentID string) string {
	if compat != CompatDeepagents {
		return ConversationHistoryDir + agentID + ".md"
	}
	sum := sha256.Sum256([]byte(sessionID + "\x00" + agentID))
	return ConversationHistoryDir + "session_" + hex.EncodeToString(sum[:4]) + ".md"
}

// IsHistoryPath reports whether a path is one HistoryPath makes, under
// either rule: a Markdown file directly in the history folder.
func IsHistoryPath(path string) bool {
	name, ok := strings.CutPrefix(path, ConversationHistoryDir)
	return ok && strings.HasSuffix(name, ".md") && !strings.Contains(name, "/")
}

// WriteHistoryHead and WriteHistoryMessage write what a summarization
// appends to its agent's history file: a heading with its number, then each
// folded message with its role, id, text and tool calls. When the file
// existed, a newline separates the entry from what it held. (A store
// writes the entry again from the messages it keeps, rather than keep it
// twice.)
func WriteHistoryHead(w io.Writer, n int, agentID string) {
	fmt.Fprintf(w, "# Summarization %d of agent %s\n\n", n, agentID)
}

// WriteHistoryMessage writes one folded message of a history entry.
func WriteHistoryMessage(w io.Writer, m *Message) {
	fmt.Fprintf(w, "## %s (%s)\n\n%s\n", m.Role, m.ID, m.Content)
	for _, c := range m.ToolCalls {
		fmt.Fprintf(w, "\n→ %s %s\n", c.Name, c.Args)
	}
	io.WriteString(w, "\n")
}

// rawIndex is where a message of the agent's effective history stands in
// its raw message list, the one deepagents' state holds: for a fork, the
// history it inherited, then its own messages; the summary messages left
// out, since deepagents keeps each summary in its summarization event, not
// among the messages. cutoff_index counts in that list, so
// `[latest summary] + raw[cutoff_index:]` is what every later call sees.
func (a *agent) rawIndex(r ref) int {
	if r.owner == a {
		n := a.inheritedLen
		for _, m := range a.msgs[:r.index] {
			if m.Kind != KindSummary {
				n++
			}
		}
		return n
	}
	n := 0
	for _, h := range a.inherited {
		if h.AgentID == r.owner.info.ID && r.index >= h.From && r.index < h.To {
			return n + r.index - h.From
		}
		n += h.Len()
	}
	return n
}

// ref is one message of a history with where it lives.
type ref struct {
	owner *agent
	index int
	msg   *Message
}

// refs lists an agent's effective history message by message.
func (a *agent) refs() []ref {
	var out []ref
	for _, r := range a.history {
		owner := a.lookup(r.AgentID)
		for i := r.From; i < r.To; i++ {
			out = append(out, ref{owner: owner, index: i, msg: owner.msgs[i]})
		}
	}
	return out
}

// rangesOf folds consecutive refs of one list back into ranges.
func rangesOf(refs []ref) []Range {
	var out []Range
	for _, r := range refs {
		if n := len(out); n > 0 && out[n-1].AgentID == r.owner.info.ID && out[n-1].To == r.index {
			out[n-1].To++
			continue
		}
		out = append(out, Range{AgentID: r.owner.info.ID, From: r.index, To: r.index + 1})
	}
	return out
}
