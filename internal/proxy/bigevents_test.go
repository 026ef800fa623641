package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/trace"
)

// bigDelta is a content piece of n bytes, as an SSE event's data.
func bigDelta(t *testing.T, n int, c byte) []byte {
	t.Helper()
	b, err := json.Marshal(chunk(map[string]any{"content": strings.Repeat(string(c), n)}, nil))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEventsOfAnySizeAreRelayedWholeAndRecorded(t *testing.T) {
	// An upstream that streams an answer in 1 MiB events, then its stop
	// chunk and [DONE]: the caller gets every byte as sent, the session the
	// whole answer.
	const size = 1 << 20
	var sent bytes.Buffer
	var first, second []byte
	first, second = bigDelta(t, size, 'a'), bigDelta(t, size, 'b')
	stop, _ := json.Marshal(chunk(map[string]any{}, "stop"))
	for _, ev := range [][]byte{first, second, stop} {
		fmt.Fprintf(&sent, "data: %s\n\n", ev)
	}
	sent.WriteString("data: [DONE]\n\n")
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(sent.Bytes())
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	status, got := h.post(t, `{"model": "m", "stream": true, "messages": [{"role": "user", "content": "Write a lot."}]}`, nil)
	if status != 200 || !bytes.Equal(got, sent.Bytes()) {
		t.Fatalf("the caller got %d and %d bytes of the %d sent (equal: %v)", status, len(got), sent.Len(), bytes.Equal(got, sent.Bytes()))
	}
	out := trace.Lists(h.store.all()[0].trace(t))["main"][1]
	if want := strings.Repeat("a", size) + strings.Repeat("b", size); out.Content != want {
		t.Errorf("the recorded answer has %d characters, want %d", len(out.Content), len(want))
	}
}

func TestOnlyBigEventsGoOutAsTheyArrive(t *testing.T) {
	// An upstream that sends one big event, then holds the rest until the
	// caller has read it: the relay must not wait for more.
	const size = 1 << 20
	release := make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	defer let()
	ev := bigDelta(t, size, 'x')
	last := bigDelta(t, size, 'y')
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", ev)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		stop, _ := json.Marshal(chunk(map[string]any{}, "stop"))
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", last, stop)
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model": "m", "stream": true, "messages": [{"role": "user", "content": "Write a lot, slowly."}]}`))
	req.Header.Set("Content-Type", "application/json")
	type result struct {
		status int
		event  []byte
		err    error
	}
	firstEvent := make(chan result, 1)
	var rest []byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			firstEvent <- result{err: err}
			return
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadBytes('\n')
		firstEvent <- result{status: resp.StatusCode, event: line, err: err}
		rest, _ = io.ReadAll(br)
	}()
	select {
	case r := <-firstEvent:
		if r.err != nil || r.status != 200 || !bytes.Equal(r.event, append(append([]byte("data: "), ev...), '\n')) {
			t.Fatalf("the first event: %d, %d bytes, %v", r.status, len(r.event), r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the caller got nothing of the first 1 MiB event while the upstream held the rest: the relay waited")
	}
	let()
	<-done
	if !bytes.Contains(rest, last) || !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
		t.Errorf("the rest of the stream: %d bytes, ends %q", len(rest), rest[max(0, len(rest)-40):])
	}
	out := trace.Lists(h.store.all()[0].trace(t))["main"][1]
	if want := strings.Repeat("x", size) + strings.Repeat("y", size); out.Content != want {
		t.Errorf("the recorded answer has %d characters, want %d", len(out.Content), len(want))
	}
}

func TestAnEventOverTheLimitIsSaidNotDropped(t *testing.T) {
	// Past the relay's limit the caller reads an error event that names it,
	// and the call is recorded as failed with it.
	defer proxy.SetMaxAnswer(256 << 10)()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", bigDelta(t, 100<<10, 'a'))
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", bigDelta(t, 300<<10, 'b'))
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	status, got := h.post(t, `{"model": "m", "stream": true, "messages": [{"role": "user", "content": "Too much."}]}`, nil)
	const said = "the upstream sent a stream event over 256 KiB"
	if status != 200 || !bytes.Contains(got, bigDelta(t, 100<<10, 'a')) || !bytes.Contains(got, []byte(said)) {
		t.Fatalf("the caller got %d, %d bytes: %.200q", status, len(got), got[max(0, len(got)-300):])
	}
	if fin := finished(t, h.store.all()[0].trace(t)); len(fin) != 1 || !strings.Contains(fin[0].Error, "stream event over") {
		t.Errorf("recorded: %+v", fin)
	}
}
