package proxy_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/proxy"
)

// gateCounter counts a text by its length, and holds any text longer than
// big until release is closed, telling entered when it begins: a big call
// caught in the middle of being counted.
type gateCounter struct {
	big     int
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (c *gateCounter) Count(s string) int {
	if len(s) > c.big {
		c.once.Do(func() { close(c.entered) })
		<-c.release
	}
	return len(s)/4 + 1
}

// A big call being counted holds no lock that another call needs: a small
// call of another session is recorded and answered while the big one is
// still being counted.
func TestBigCallDoesNotBlockOthers(t *testing.T) {
	counter := &gateCounter{big: 1 << 20, entered: make(chan struct{}), release: make(chan struct{})}
	answer, _ := json.Marshal(completion(map[string]any{"role": "assistant", "content": "Done."}, "stop"))
	p := proxy.New(proxy.Config{Upstream: &instantUpstream{answer: answer}, Store: &memStore{}, Counter: counter,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer p.Close()
	call := func(key, content string) *httptest.ResponseRecorder {
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]any{{"role": "user", "content": content}}})
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		if key != "" {
			req.Header.Set(proxy.SessionHeader, key)
		}
		w := httptest.NewRecorder()
		p.ServeChat(w, req)
		return w
	}
	bigDone := make(chan int)
	go func() { bigDone <- call("big", strings.Repeat("x", 2<<20)).Code }()
	<-counter.entered
	small := make(chan struct{})
	go func() {
		defer close(small)
		for _, key := range []string{"small", ""} { // grouped by its header, and by content
			if w := call(key, "Say hello."); w.Code != http.StatusOK {
				t.Errorf("small call (key %q) beside a big one being counted: %d %s", key, w.Code, w.Body)
			}
		}
	}()
	select {
	case <-small:
	case <-time.After(30 * time.Second): // a deadline, not a wait: it passes at once or never
		t.Error("a small call waited for a big one of another session to be counted")
	}
	close(counter.release)
	<-small
	if code := <-bigDone; code != http.StatusOK {
		t.Fatalf("big call: %d", code)
	}
}
