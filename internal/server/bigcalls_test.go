package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
	"github.com/delegationstudio/studio/internal/proxy"
)

// Issue 28: a few huge model calls at once took the machine, since the
// recording endpoint is outside the document checks' admission. Big ones
// (over BigCallBody) are now taken MaxBigCalls at a time, the next refused
// at once in the provider's shape with Retry-After; small ones are never
// held.
func TestBigCallsAreTakenAFewAtATime(t *testing.T) {
	up, err := proxy.NewHTTPUpstream(openaitest.NewServer(t, func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Content: "ok"}
	}).URL, "")
	if err != nil {
		t.Fatal(err)
	}
	s := receivingStudio(t, Config{Upstream: up, ProxyDoneAfter: 50 * time.Millisecond, Limits: Limits{MaxBigCalls: 2, BodyGrace: 5 * time.Minute}})
	big := `{"model": "m", "messages": [{"role": "user", "content": "` + strings.Repeat("word ", 2*BigCallBody/5) + `"}]}`
	// Two big calls whose bodies are still coming hold both places.
	type answer struct {
		status int
		body   string
	}
	rest := make([]*io.PipeWriter, 2)
	answers := make(chan answer, 2)
	for i := range rest {
		pr, pw := io.Pipe()
		rest[i] = pw
		req, _ := http.NewRequest("POST", s.ts.URL+"/v1/chat/completions", pr)
		req.ContentLength = int64(len(big))
		req.Header.Set("Content-Type", "application/json")
		go func() {
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{0, err.Error()}
				return
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			answers <- answer{res.StatusCode, string(b)}
		}()
		if _, err := io.WriteString(pw, big[:100]); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(s.srv.bigCalls) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the two big calls never took their places (%d taken)", len(s.srv.bigCalls))
		}
		time.Sleep(5 * time.Millisecond)
	}
	hdr := map[string]string{"Content-Type": "application/json"}
	t.Run("a third is refused at once, in OpenAI's shape, with Retry-After", func(t *testing.T) {
		res, body := s.raw("POST", "/v1/chat/completions", hdr, big)
		if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || errorType(t, body, false) != "server_error" ||
			!strings.Contains(body, "large model calls (over 1 MiB) at once") {
			t.Errorf("%d %q %.300s", res.StatusCode, res.Header.Get("Retry-After"), body)
		}
	})
	t.Run("and in Anthropic's on its route", func(t *testing.T) {
		res, body := s.raw("POST", "/v1/messages", hdr, big)
		if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || errorType(t, body, true) == "" {
			t.Errorf("%d %q %.300s", res.StatusCode, res.Header.Get("Retry-After"), body)
		}
	})
	t.Run("a small one goes through", func(t *testing.T) {
		res, body := s.raw("POST", "/v1/chat/completions", hdr, `{"model": "m", "messages": [{"role": "user", "content": "Hi."}]}`)
		if res.StatusCode != 200 {
			t.Errorf("%d %.300s", res.StatusCode, body)
		}
	})
	_, metrics := s.raw("GET", "/metrics", nil, "")
	if !strings.Contains(metrics, "studio_big_calls_taking 2") || !strings.Contains(metrics, "studio_big_calls_refused_total 2") {
		t.Errorf("metrics:\n%s", grepLines(metrics, "studio_big_calls"))
	}
	for _, pw := range rest {
		if _, err := io.WriteString(pw, big[100:]); err != nil {
			t.Fatal(err)
		}
		pw.Close()
	}
	for range rest {
		if a := <-answers; a.status != 200 {
			t.Errorf("a held big call, once sent: %d %.300s", a.status, a.body)
		}
	}
	t.Run("their places are given back, and the memory they took", func(t *testing.T) {
		if n := len(s.srv.bigCalls); n != 0 {
			t.Errorf("%d places still taken", n)
		}
		if res, body := s.raw("POST", "/v1/chat/completions", hdr, big); res.StatusCode != 200 {
			t.Errorf("a big call once the others are done: %d %.300s", res.StatusCode, body)
		}
		for s.srv.mem.runs.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no memory was given back after the big calls")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// errorType is an error body's type: OpenAI's {"error": {"type"}} or
// Anthropic's {"type": "error", "error": {"type"}}.
func errorType(t *testing.T, body string, anthropic bool) string {
	t.Helper()
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" || anthropic != (e.Type == "error") {
		t.Errorf("not an error in the provider's shape (anthropic %v): %.300s", anthropic, body)
	}
	return e.Error.Type
}

func grepLines(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(out)
}
