package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
)

// heldUpstream is an upstream that takes a request, says so on arrived,
// and then holds it until the studio lets it go. stream: it first starts a
// streamed answer (one event, flushed) in its provider's shape.
func heldUpstream(t *testing.T, anthropic, stream bool) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	// Buffered, and sent to without blocking: a client that retries must
	// not hang the upstream on a second request nobody waits for.
	arrived := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			if anthropic {
				_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n")
			} else {
				_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}`+"\n\n")
			}
			w.(http.Flusher).Flush()
		}
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-r.Context().Done() // the studio cuts it when it stops
	}))
	t.Cleanup(up.Close)
	return up, arrived
}

// A call waiting on its upstream when the studio gets SIGTERM is answered
// 503, in its provider's error shape, with Retry-After — an error a client
// retries, never an empty 200 — and a streamed answer under way ends with
// an error event; the call is recorded as cut by the stop.
func TestSIGTERMAnswersCallsInFlight(t *testing.T) {
	const chat = `{"model": "m", "messages": [{"role": "user", "content": "hi"}]%s}`
	const msgs = `{"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]%s}`
	for _, tc := range []struct {
		name      string
		anthropic bool
		stream    bool
	}{
		{"chat", false, false},
		{"chat stream", false, true},
		{"messages", true, false},
		{"messages stream", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, arrived := heldUpstream(t, tc.anthropic, tc.stream)
			dbPath := filepath.Join(t.TempDir(), "s.db")
			flags := []string{"--upstream-url", up.URL + "/v1"}
			path, body := "/v1/chat/completions", chat
			if tc.anthropic {
				flags = []string{"--upstream-url", up.URL, "--upstream-provider", "anthropic"}
				path, body = "/v1/messages", msgs
			}
			stream := ""
			if tc.stream {
				stream = `, "stream": true`
			}
			s := serve(t, dbPath, flags...)
			req, err := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(strings.Replace(body, "%s", stream, 1)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			type answer struct {
				resp *http.Response
				body []byte
				err  error
			}
			got := make(chan answer, 1)
			begun := make(chan struct{}) // the client has the answer's status and headers
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					got <- answer{err: err}
					return
				}
				close(begun)
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				got <- answer{resp, b, err}
			}()
			select {
			case <-arrived:
			case a := <-got:
				t.Fatalf("answered before the upstream had the call: %+v %s\n%s", a.resp, a.body, s.stderr)
			}
			if tc.stream {
				// A stream under way: the relay has sent the first event
				// on, so the stop must end it with an error event.
				select {
				case <-begun:
				case a := <-got:
					t.Fatalf("the stream never began: %+v %v %s\n%s", a.resp, a.err, a.body, s.stderr)
				}
			}
			s.stop(t)
			a := <-got
			if a.err != nil {
				t.Fatalf("the client got %v", a.err)
			}
			if tc.stream {
				checkStreamCut(t, tc.anthropic, a.resp, a.body)
			} else {
				checkClosing(t, tc.anthropic, a.resp, a.body)
			}
			checkRecordedStop(t, dbPath)
		})
	}
}

// checkClosing: 503, Retry-After, the provider's error shape.
func checkClosing(t *testing.T, anthropic bool, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %s, body %q: want 503", resp.Status, body)
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" {
		t.Errorf("no Retry-After (headers %v)", resp.Header)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if anthropic {
		var e struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Type != "error" || e.Error.Type != "api_error" || e.Error.Message == "" {
			t.Errorf("body %s: want Anthropic's error shape, type api_error (%v)", body, err)
		}
		return
	}
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "closing" || e.Error.Type != "server_error" || e.Error.Message == "" {
		t.Errorf("body %s: want OpenAI's error shape, code closing (%v)", body, err)
	}
}

// checkStreamCut: the stream began 200 and ends with an error event.
func checkStreamCut(t *testing.T, anthropic bool, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s, body %q: the stream had begun", resp.Status, body)
	}
	events := strings.Split(strings.TrimSpace(string(body)), "\n\n")
	last := events[len(events)-1]
	if len(events) < 2 {
		t.Fatalf("stream %q: want the upstream's event, then an error event", body)
	}
	if anthropic {
		if !strings.HasPrefix(last, "event: error\ndata: ") || !strings.Contains(last, `"type":"error"`) {
			t.Errorf("last event %q: want Anthropic's error event", last)
		}
		return
	}
	if !strings.HasPrefix(last, "data: ") || !strings.Contains(last, `"code":"closing"`) {
		t.Errorf("last event %q: want an error with code closing", last)
	}
}

// checkRecordedStop: the session ended interrupted, its call failed with
// the stop as the reason.
func checkRecordedStop(t *testing.T, dbPath string) {
	t.Helper()
	d, err := db.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	list, err := d.Sessions(context.Background(), 0)
	if err != nil || len(list) != 1 {
		t.Fatalf("sessions %+v, %v: want the one recorded", list, err)
	}
	if list[0].Status != delegation.StatusInterrupted {
		t.Errorf("session %s: want interrupted", list[0].Status)
	}
	var errs []string
	err = d.Read(context.Background(), list[0].ID, func(r db.Reader) error {
		for c, err := range r.ModelCalls() {
			if err != nil {
				return err
			}
			errs = append(errs, c.Error)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "studio stopped") {
		t.Errorf("the call ended with errors %q: want one, saying the studio stopped", errs)
	}
}
