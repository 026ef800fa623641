package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/proxy"
)

// splitKey is the operator's key, and where an upstream splits it across
// stream deltas: in two pieces, and in three.
const splitKey = "sk-splitQ7vR2mX9pL4wK8nT3zY6"

// splitAt are the offsets the key is cut at, by the split's name.
func splitAt(name string) []int {
	if name == "three" {
		return []int{5, 15}
	}
	return []int{9}
}

// pieces is the key cut at the given offsets.
func pieces(cuts []int) []string {
	var out []string
	from := 0
	for _, c := range cuts {
		out = append(out, splitKey[from:c])
		from = c
	}
	return append(out, splitKey[from:])
}

// splitting are the texts an upstream streams for text: its key split
// into pieces, each piece a delta of its own, before and after as they are.
func splitting(before, after string, cuts []int) []string {
	p := pieces(cuts)
	p[0] = before + p[0]
	p[len(p)-1] += after
	return p
}

// splitKeyUpstream streams an answer whose text and tool call echo the key
// split across deltas — chat completions' content and arguments, or
// Anthropic's text_delta and input_json_delta — the split named by the
// request's last user message ("two" or "three").
func splitKeyUpstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		cuts := splitAt(req.Messages[len(req.Messages)-1].Content)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		ev := func(name, data string) {
			if name != "" {
				fmt.Fprintf(w, "event: %s\n", name)
			}
			fmt.Fprintf(w, "data: %s\n\n", data)
			fl.Flush()
		}
		text, args := splitting("Your key is ", " ok.", cuts), splitting(`{"note":"`, `"}`, cuts)
		if r.URL.Path == "/v1/messages" {
			anthropicSplitStream(ev, text, args)
			return
		}
		chatSplitStream(ev, text, args)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func chatSplitStream(ev func(name, data string), text, args []string) {
	const head = `{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":`
	ev("", head+`{"role":"assistant","content":""},"finish_reason":null}]}`)
	for _, s := range text {
		ev("", head+`{"content":`+jsonString(s)+`},"finish_reason":null}]}`)
	}
	ev("", head+`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"note","arguments":""}}]},"finish_reason":null}]}`)
	for _, s := range args {
		ev("", head+`{"tool_calls":[{"index":0,"function":{"arguments":`+jsonString(s)+`}}]},"finish_reason":null}]}`)
	}
	ev("", head+`{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":9}}`)
	ev("", "[DONE]")
}

func anthropicSplitStream(ev func(name, data string), text, args []string) {
	ev("message_start", `{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}`)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	for _, s := range text {
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+jsonString(s)+`}}`)
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"note","input":{}}}`)
	for _, s := range args {
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":`+jsonString(s)+`}}`)
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`)
	ev("message_stop", `{"type":"message_stop"}`)
}

// streamTexts puts a caller's stream back together: the text (content,
// text_delta) and the tool call's arguments (arguments, partial_json).
func streamTexts(t *testing.T, body string) (text, args string) {
	t.Helper()
	var tb, ab strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				s, ok := e.(string)
				switch {
				case ok && (k == "content" || k == "text"):
					tb.WriteString(s)
				case ok && (k == "arguments" || k == "partial_json"):
					ab.WriteString(s)
				default:
					walk(e)
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatalf("the caller got an event that is not JSON: %s", data)
		}
		walk(v)
	}
	return tb.String(), ab.String()
}

// An upstream that echoes the operator's key split across stream deltas —
// in two pieces and in three, in the text and in a tool call's arguments,
// on /v1/chat/completions and /v1/messages — has it redacted as if it had
// come whole: the caller's stream says [redacted] and nothing is lost
// around it; no piece of the key is in the stream, the database file, its
// WAL, the trace or OTLP export.
func TestAKeySplitAcrossDeltasIsRedacted(t *testing.T) {
	upSrv := splitKeyUpstream(t)
	chat, err := proxy.NewHTTPUpstream(upSrv.URL, splitKey)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := proxy.NewAnthropicUpstream(upSrv.URL, splitKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, route := range []struct {
		path string
		up   proxy.Upstream
	}{{"/v1/chat/completions", chat}, {"/v1/messages", msgs}} {
		t.Run(strings.TrimPrefix(route.path, "/v1/"), func(t *testing.T) {
			dbPath := filepath.Join(t.TempDir(), "studio.db")
			s := startStudioOn(t, dbPath, Config{Upstream: route.up, ProxyDoneAfter: 50 * time.Millisecond, ProxyQuiet: 100 * time.Millisecond})
			s.t = t
			places := map[string]string{}
			for _, split := range []string{"two", "three"} {
				res, body := s.raw("POST", route.path, map[string]string{"Content-Type": "application/json", "Anthropic-Version": "2023-06-01",
					proxy.SessionHeader: split},
					`{"model": "m", "max_tokens": 50, "stream": true, "messages": [{"role": "user", "content": "`+split+`"}]}`)
				if res.StatusCode != 200 {
					t.Fatalf("%s: %d %s", split, res.StatusCode, body)
				}
				text, args := streamTexts(t, body)
				if text != "Your key is [redacted] ok." || args != `{"note":"[redacted]"}` {
					t.Errorf("key split in %s: the caller's stream says %q, arguments %q; want the key redacted, nothing else changed", split, text, args)
				}
				places["the stream of the key split in "+split] = body
			}
			s.collectKeyPlaces(places, dbPath)
			checkNoKeyPiece(t, places)
		})
	}
}

// collectKeyPlaces adds what the studio keeps of its sessions to places:
// each session's trace and OTLP export, the database's files.
func (s *studio) collectKeyPlaces(places map[string]string, dbPath string) {
	list, err := s.db.Sessions(context.Background(), 0)
	if err != nil || len(list) != 2 {
		s.t.Fatalf("sessions: %d %v", len(list), err)
	}
	for _, sess := range list {
		s.waitDone(sess.ID)
		_, tr := s.api("GET", "/api/sessions/"+sess.ID+"/trace", "", nil)
		places["the trace export of "+sess.Name] = string(tr)
		if !strings.Contains(string(tr), "[redacted]") {
			s.t.Errorf("%s: the recorded call does not show the marker: %.600s", sess.Name, tr)
		}
		_, ot := s.api("GET", "/api/sessions/"+sess.ID+"/otlp", "", nil)
		places["the OTLP export of "+sess.Name] = string(ot)
	}
	files, _ := filepath.Glob(dbPath + "*")
	if len(files) < 2 {
		s.t.Fatalf("database files: %v; want the WAL beside the file", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			s.t.Fatal(err)
		}
		places[filepath.Base(f)] = string(b)
	}
}

// checkNoKeyPiece fails when the key, or a piece of it an upstream split
// it into (of 8 bytes or more), is in any of places.
func checkNoKeyPiece(t *testing.T, places map[string]string) {
	t.Helper()
	parts := []string{splitKey}
	for _, split := range []string{"two", "three"} {
		for _, p := range pieces(splitAt(split)) {
			if len(p) >= 8 {
				parts = append(parts, p)
			}
		}
	}
	for what, text := range places {
		for _, part := range parts {
			if strings.Contains(text, part) {
				t.Errorf("the operator's key (%q) is in %s", part, what)
			}
		}
	}
}
