package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/delegationstudio/studio/internal/model/remote"
)

// The wire layer sits between go-openai and the network. go-openai builds
// requests and reads answers in the shape OpenAI documents; servers that
// others wrote differ in small ways, and a few things cannot be said through
// go-openai's types. Each is mended here, in one place:
//
//   - requests: a temperature of 0 (go-openai omits a zero temperature), and
//     "content": null on an assistant message that only calls tools (go-openai
//     omits the key; strict servers want it);
//   - answers: tool-call arguments sent as a JSON object instead of a string
//     (go-openai fails the whole answer), "reasoning" where go-openai reads
//     "reasoning_content", DeepSeek's prompt_cache_hit_tokens as cached tokens;
//   - errors: the body of an error answer is kept whatever its shape (go-openai
//     loses it when "error" is a string), and an error event inside a stream
//     is read whatever its shape and ends the stream, so classify sees it.

// maxErrorBody bounds how much of an error answer is kept.
const maxErrorBody = 64 << 10

// attemptInfo is what the wire layer saw of one attempt. One goroutine uses
// it: http.Client.Do and the body reads run in the goroutine that makes the
// attempt.
type attemptInfo struct {
	status  int
	header  http.Header
	body    []byte // an error answer's body (status >= 400), at most maxErrorBody
	sawDone bool   // the stream carried its [DONE] line
	// said is an error the endpoint sent with status 200: an error event in
	// a stream, or a JSON body that is an error instead of a completion.
	said *remote.EndpointError
	// temperature, when set, is sent as the request's temperature.
	temperature *float64
	// streamed: the request asked for a stream.
	streamed bool
}

type infoKey struct{}

// errStreamError ends a stream's body at an error event; classify then reads
// the event from attemptInfo.said.
var errStreamError = errors.New("the endpoint sent an error event in the stream")

// recorder is the HTTP client go-openai uses.
type recorder struct{ next *http.Client }

// Do mends the request, sends it, and records what came back.
func (r recorder) Do(req *http.Request) (*http.Response, error) {
	info, _ := req.Context().Value(infoKey{}).(*attemptInfo)
	if info != nil && req.Body != nil {
		if err := mendRequest(req, info); err != nil {
			return nil, err
		}
	}
	resp, err := r.next.Do(req)
	if info == nil || resp == nil {
		return resp, err
	}
	info.status, info.header = resp.StatusCode, resp.Header
	ct := resp.Header.Get("Content-Type")
	switch {
	case resp.StatusCode >= 400:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		info.body = body
		resp.Body = io.NopCloser(bytes.NewReader(body))
	case strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &streamMender{rc: resp.Body, r: bufio.NewReaderSize(resp.Body, 16<<10), info: info}
	default:
		// A whole answer: read it, mend it, hand it on.
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		if e, ok := errorEvent(body); ok {
			info.said = e
		} else {
			body = mendAnswer(body)
			if info.streamed && resp.StatusCode == http.StatusOK {
				// A server that ignores "stream": the whole answer, as
				// the one chunk of a stream.
				body = wholeAsStream(body)
				info.sawDone = true
			}
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
	}
	return resp, err
}

// mendRequest rewrites the request body for what go-openai cannot express.
func mendRequest(req *http.Request, info *attemptInfo) error {
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return err
	}
	raw = mendRequestBody(raw, info.temperature)
	req.Body = io.NopCloser(bytes.NewReader(raw))
	req.ContentLength = int64(len(raw))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	return nil
}

func mendRequestBody(raw []byte, temperature *float64) []byte {
	var body map[string]json.RawMessage
	if json.Unmarshal(raw, &body) != nil {
		return raw
	}
	changed := false
	if temperature != nil {
		body["temperature"] = json.RawMessage(strconv.FormatFloat(*temperature, 'g', -1, 64))
		changed = true
	}
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(body["messages"], &msgs) == nil {
		fixed := false
		for _, m := range msgs {
			if _, has := m["content"]; !has && string(m["role"]) == `"assistant"` {
				m["content"] = json.RawMessage("null")
				fixed = true
			}
		}
		if fixed {
			if b, err := json.Marshal(msgs); err == nil {
				body["messages"], changed = b, true
			}
		}
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(body)
	if err != nil {
		return raw
	}
	return out
}

// streamMender passes a server-sent-event stream on line by line: it mends
// each data line go-openai could not read, notes [DONE], and ends the
// stream at an error event.
type streamMender struct {
	rc      io.Closer
	r       *bufio.Reader
	info    *attemptInfo
	pending []byte
	err     error
	// errorNext: an "event: error" line came; its data line is the error.
	errorNext bool
}

func (s *streamMender) Close() error { return s.rc.Close() }

func (s *streamMender) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		line, err := s.r.ReadBytes('\n')
		s.pending = s.mendLine(line)
		if err != nil {
			s.err = err
		}
		if s.info.said != nil {
			s.pending, s.err = nil, errStreamError
		}
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

func (s *streamMender) mendLine(line []byte) []byte {
	t := bytes.TrimSpace(line)
	if ev, ok := bytes.CutPrefix(t, []byte("event:")); ok {
		s.errorNext = string(bytes.TrimSpace(ev)) == "error"
		return line
	}
	data, ok := bytes.CutPrefix(t, []byte("data:"))
	if !ok {
		return line
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		s.info.sawDone = true
		return line
	}
	if s.errorNext {
		s.errorNext = false
		e := remote.ParseErrorBody(data)
		s.info.said = &e
		return nil
	}
	if e, ok := errorEvent(data); ok {
		s.info.said = e
		return nil
	}
	fixed := mendAnswer(data)
	if len(fixed) == len(data) && bytes.Equal(fixed, data) {
		return line
	}
	return append(append([]byte("data: "), fixed...), '\n')
}

// errorEvent reports whether a JSON document is an error instead of an
// answer: an object with an "error" member and no choices.
func errorEvent(doc []byte) (*remote.EndpointError, bool) {
	if !bytes.Contains(doc, []byte(`"error"`)) {
		return nil, false
	}
	var probe struct {
		Error   json.RawMessage `json:"error"`
		Choices json.RawMessage `json:"choices"`
	}
	if json.Unmarshal(doc, &probe) != nil || len(probe.Error) == 0 || string(probe.Error) == "null" || len(probe.Choices) > 0 {
		return nil, false
	}
	e := remote.ParseErrorBody(doc)
	return &e, true
}

// needsMending finds, cheaply, the answers mendAnswer would change: most
// (a stream's text chunks) name none of the keys, which bytes.Contains
// tells faster than the regexp, run only on those that do.
func needsMending(doc []byte) bool {
	for _, key := range mendedKeys {
		if bytes.Contains(doc, key) {
			return mendable().Match(doc)
		}
	}
	return false
}

var (
	mendedKeys = [][]byte{[]byte(`"arguments"`), []byte(`"reasoning"`), []byte(`"prompt_cache_hit_tokens"`)}
	mendable   = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`"arguments"\s*:\s*[\[{]|"reasoning"\s*:|"prompt_cache_hit_tokens"`)
	})
)

// mendAnswer rewrites a completion or a stream chunk into the shape
// go-openai reads; anything it does not recognise is passed on unchanged.
func mendAnswer(doc []byte) []byte {
	if !needsMending(doc) {
		return doc
	}
	v, ok := decodeObject(doc)
	if !ok {
		return doc
	}
	choices, _ := v["choices"].([]any)
	for _, ch := range choices {
		ch, _ := ch.(map[string]any)
		for _, key := range []string{"message", "delta"} {
			msg, _ := ch[key].(map[string]any)
			if msg == nil {
				continue
			}
			if r, ok := msg["reasoning"].(string); ok && msg["reasoning_content"] == nil {
				msg["reasoning_content"] = r
			}
			calls, _ := msg["tool_calls"].([]any)
			for _, c := range calls {
				c, _ := c.(map[string]any)
				stringArgs(c["function"])
			}
			stringArgs(msg["function_call"])
		}
	}
	if u, ok := v["usage"].(map[string]any); ok && u["prompt_tokens_details"] == nil {
		if hit, ok := u["prompt_cache_hit_tokens"]; ok {
			u["prompt_tokens_details"] = map[string]any{"cached_tokens": hit}
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return doc
	}
	return out
}

// wholeAsStream writes a whole completion as a stream of one chunk: each
// choice's message becomes its delta, its tool calls numbered.
func wholeAsStream(doc []byte) []byte {
	v, ok := decodeObject(doc)
	if !ok {
		return doc
	}
	choices, _ := v["choices"].([]any)
	for _, ch := range choices {
		ch, _ := ch.(map[string]any)
		if ch == nil {
			continue
		}
		msg, _ := ch["message"].(map[string]any)
		delete(ch, "message")
		if msg == nil {
			continue
		}
		calls, _ := msg["tool_calls"].([]any)
		for i, c := range calls {
			if c, ok := c.(map[string]any); ok {
				c["index"] = i
			}
		}
		if msg["content"] == nil {
			delete(msg, "content")
		}
		ch["delta"] = msg
	}
	v["object"] = "chat.completion.chunk"
	b, err := json.Marshal(v)
	if err != nil {
		return doc
	}
	return append(append([]byte("data: "), b...), "\n\ndata: [DONE]\n\n"...)
}

// decodeObject reads a JSON object, its numbers kept as written.
func decodeObject(doc []byte) (map[string]any, bool) {
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	return v, dec.Decode(&v) == nil && v != nil
}

// stringArgs turns a function's arguments into the JSON string the wire
// format has, when a server sent them as an object.
func stringArgs(fn any) {
	f, _ := fn.(map[string]any)
	if f == nil {
		return
	}
	switch a := f["arguments"].(type) {
	case map[string]any, []any:
		if b, err := json.Marshal(a); err == nil {
			f["arguments"] = string(b)
		}
	}
}
