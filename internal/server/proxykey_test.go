package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/proxy"
)

// lockedBuffer collects a logger's lines from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An upstream that echoes the operator's key — in an error's body, in its
// headers, in a streamed and in a whole answer — has it kept out of
// everything: the caller (who sent no key) gets a marker, and the key is
// nowhere in the database file, its WAL, the exports, the page, the logs
// or /metrics.
func TestTheOperatorsKeyIsNeverStoredOrRelayed(t *testing.T) {
	const key = "sk-operator-0123456789abcdefXYZ"
	upSrv, sentAuth := keyEchoingUpstream(t)
	up, err := proxy.NewHTTPUpstream(upSrv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	dbPath := filepath.Join(t.TempDir(), "studio.db")
	s := startStudioOn(t, dbPath, Config{Upstream: up, ProxyDoneAfter: 50 * time.Millisecond, ProxyQuiet: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	s.t = t

	var relayed []string
	for _, c := range []struct{ prompt, stream string }{
		{"Fail, whole.", "false"}, {"Fail, streamed.", "true"}, {"Answer, whole.", "false"}, {"Answer, streamed.", "true"},
	} {
		res, body := s.raw("POST", "/v1/chat/completions", map[string]string{"Content-Type": "application/json"},
			`{"model": "m", "stream": `+c.stream+`, "messages": [{"role": "user", "content": "`+c.prompt+`"}]}`)
		var hdr strings.Builder
		_ = res.Header.Write(&hdr)
		relayed = append(relayed, c.prompt+"\n"+hdr.String()+"\n"+body)
		if !strings.Contains(body, "[redacted]") {
			t.Errorf("%s: the caller got %d %s; want the echoed key replaced with [redacted]", c.prompt, res.StatusCode, body)
		}
	}
	// The key did go to the upstream, which echoed it: what follows can fail.
	for _, a := range sentAuth() {
		if a != "Bearer "+key {
			t.Fatalf("the upstream got Authorization %q; want the operator's key", a)
		}
	}

	list, err := s.db.Sessions(context.Background(), 0)
	if err != nil || len(list) != 4 {
		t.Fatalf("sessions: %d %v", len(list), err)
	}
	places := map[string]string{}
	for i, r := range relayed {
		places[fmt.Sprintf("the answer to call %d", i)] = r
	}
	for _, sess := range list {
		s.waitDone(sess.ID)
		_, tr := s.api("GET", "/api/sessions/"+sess.ID+"/trace", "", nil)
		places["the trace export of "+sess.Name] = string(tr)
		_, ot := s.api("GET", "/api/sessions/"+sess.ID+"/otlp", "", nil)
		places["the OTLP export of "+sess.Name] = string(ot)
		res, page := s.raw("GET", "/sessions/"+sess.ID, nil, "")
		if res.StatusCode != 200 {
			t.Fatalf("the session page: %d", res.StatusCode)
		}
		places["the page of "+sess.Name] = page
		if !strings.Contains(string(tr), "[redacted]") {
			t.Errorf("%s: the recorded call does not show the marker: %.600s", sess.Name, tr)
		}
	}
	_, home := s.raw("GET", "/", nil, "")
	places["the home page"] = home
	_, metrics := s.raw("GET", "/metrics", nil, "")
	places["/metrics"] = metrics
	places["the logs"] = logs.String()
	keyNowhere(t, key, dbPath, places)
}

// keyEchoingUpstream is an OpenAI-compatible upstream that writes back the
// Authorization it got — in an error's body, headers, a stream's comment
// and text, a whole answer — and the Authorization of each request.
func keyEchoingUpstream(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var sent []string // the Authorization each upstream request came with
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		auth := r.Header.Get("Authorization")
		mu.Lock()
		sent = append(sent, auth)
		mu.Unlock()
		w.Header().Set("X-Request-Id", "req-"+strings.TrimPrefix(auth, "Bearer "))
		w.Header().Set("Openai-Organization", auth)
		switch {
		case bytes.Contains(body, []byte("Fail")):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"error": {"message": "Upstream broke while using %s (sent as %s).", "type": "server_error", "param": null, "code": null}}`,
				strings.TrimPrefix(auth, "Bearer "), auth)
		case bytes.Contains(body, []byte(`"stream":true`)):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, ": keep-alive %s\n\n", auth)
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Your key is %s.\"},\"finish_reason\":null}]}\n\n",
				strings.TrimPrefix(auth, "Bearer "))
			fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Your key is %s."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5}}`,
				strings.TrimPrefix(auth, "Bearer "))
		}
	}))
	t.Cleanup(upSrv.Close)
	return upSrv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), sent...)
	}
}
