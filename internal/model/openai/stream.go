package openai

import (
	"cmp"
	"context"
	"errors"
	"io"
	"sort"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/remote"
)

// streamOnce makes one streamed attempt: text deltas go to onDelta as they
// arrive; tool calls, which arrive in pieces, are put back together. idle is
// re-armed at every chunk, so CallTimeout bounds the silence between chunks,
// not the length of the answer.
func (m *Model) streamOnce(ctx context.Context, at *remote.Attempt, c *call, info *attemptInfo,
	onDelta func(string)) (*result, *remote.Failure) {
	info.streamed = true
	st, err := m.client.CreateChatCompletionStream(at.Ctx, m.wireRequest(c, true))
	if err != nil || info.said != nil {
		if st != nil {
			st.Close()
		}
		return nil, m.classify(ctx, at, c, info, err)
	}
	defer st.Close()

	acc := accumulator{hold: m.ep.KeyHold()}
	sent := false
	for {
		chunk, err := st.Recv()
		at.Reset()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, remote.BrokeOff(sent, m.classify(ctx, at, c, info, err))
		}
		for _, d := range acc.add(chunk) {
			onDelta(d)
			sent = true
		}
	}
	for _, d := range acc.rest() {
		onDelta(d)
	}
	// go-openai reports a stream that just stops as a normal end; an answer
	// is complete only with [DONE] or a finish_reason.
	if !acc.finished && !info.sawDone {
		return nil, remote.BrokeOff(sent, &remote.Failure{Retry: true, What: "a stream that ended before the answer was complete"})
	}
	return acc.result(), nil
}

// accumulator puts a streamed answer together.
type accumulator struct {
	content   strings.Builder
	reasoning strings.Builder
	refusal   strings.Builder
	calls     []*partCall
	byIndex   map[int]*partCall
	finished  bool
	finish    string // the finish_reason
	usage     *delegation.Usage
	id, model string // the first chunk's that says them
	// hold keeps the endpoint's key out of the content's deltas, which go
	// out as they come; nil holds nothing. The whole answer is redacted
	// once it is put together (Model.Generate).
	hold *remote.KeyHold
}

// partCall is a tool call being received: its id and name come in its first
// chunk, its arguments piece by piece, interleaved with other calls' pieces.
type partCall struct {
	key      int // the wire's index, or the order of arrival when it has none
	id, name string
	args     strings.Builder
}

// add takes one chunk and returns its text deltas, to be shown now.
func (a *accumulator) add(chunk goopenai.ChatCompletionStreamResponse) []string {
	var deltas []string
	a.id, a.model = cmp.Or(a.id, chunk.ID), cmp.Or(a.model, chunk.Model)
	if u := usageOf(chunk.Usage); u != nil {
		a.usage = u
	}
	for _, ch := range chunk.Choices {
		if ch.Index != 0 {
			continue // n is 1: other choices are never asked for
		}
		d := ch.Delta
		deltas = a.addContent(deltas, d.Content)
		a.refusal.WriteString(d.Refusal)
		a.reasoning.WriteString(d.ReasoningContent)
		for _, tc := range d.ToolCalls {
			p := a.part(tc)
			if p.id == "" {
				p.id = tc.ID
			}
			if p.name == "" {
				p.name = tc.Function.Name
			}
			p.args.WriteString(tc.Function.Arguments)
		}
		if d.FunctionCall != nil {
			// The legacy function_call: a single call, in pieces.
			tc := goopenai.ToolCall{Index: new(int), Function: *d.FunctionCall}
			p := a.part(tc)
			if p.name == "" {
				p.name = d.FunctionCall.Name
			}
			p.args.WriteString(d.FunctionCall.Arguments)
		}
		if ch.FinishReason != "" && ch.FinishReason != goopenai.FinishReasonNull {
			a.finished, a.finish = true, string(ch.FinishReason)
			deltas = append(deltas, a.rest()...)
		}
	}
	return deltas
}

// addContent adds a piece of the content, and appends to deltas what of
// it can be shown now: all but a tail that may be the start of the key.
func (a *accumulator) addContent(deltas []string, piece string) []string {
	if a.hold != nil {
		piece = a.hold.Next(piece)
	}
	if piece == "" {
		return deltas
	}
	a.content.WriteString(piece)
	return append(deltas, piece)
}

// rest is the content held back, now that the answer has ended: the end
// showed it was not the key.
func (a *accumulator) rest() []string {
	if a.hold == nil || !a.hold.Holding() {
		return nil
	}
	s := a.hold.Rest()
	a.content.WriteString(s)
	return []string{s}
}

// part finds the call a piece belongs to: by index, the wire's way; a
// server that sends no index is followed by id, and a piece with neither
// continues the last call.
func (a *accumulator) part(tc goopenai.ToolCall) *partCall {
	if a.byIndex == nil {
		a.byIndex = map[int]*partCall{}
	}
	if tc.Index != nil {
		p := a.byIndex[*tc.Index]
		if p == nil {
			p = &partCall{key: *tc.Index}
			a.byIndex[*tc.Index] = p
			a.calls = append(a.calls, p)
		}
		return p
	}
	if tc.ID != "" {
		for _, p := range a.calls {
			if p.id == tc.ID {
				return p
			}
		}
	} else if n := len(a.calls); n > 0 {
		return a.calls[n-1]
	}
	p := &partCall{key: len(a.calls)}
	a.calls = append(a.calls, p)
	return p
}

func (a *accumulator) result() *result {
	a.rest()
	r := &result{content: a.content.String(), reasoning: a.reasoning.String(), usage: a.usage, finishReason: a.finish,
		id: a.id, model: a.model}
	if r.content == "" {
		r.content = a.refusal.String()
	}
	calls := append([]*partCall(nil), a.calls...)
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].key < calls[j].key })
	for _, p := range calls {
		r.calls = append(r.calls, rawCall{id: p.id, name: p.name, args: p.args.String()})
	}
	return r
}
