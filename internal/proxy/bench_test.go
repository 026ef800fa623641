package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/tokens"
)

// instantUpstream answers every request at once, with a whole answer, in
// the process: what is measured is the endpoint's own work.
type instantUpstream struct{ answer []byte }

func (u *instantUpstream) Chat(_ context.Context, _ *proxy.Exchange, out *proxy.Reply) {
	out.Whole(http.StatusOK, nil, u.answer)
}
func (*instantUpstream) Models(context.Context, http.Header, string, http.ResponseWriter) {}
func (*instantUpstream) String() string                                                   { return "instant" }

// longAgentBodies are the n requests of one agent that calls its model n
// times, each request holding the whole conversation so far, as every
// framework sends it: O(n²) messages arrive for 2n distinct ones.
func longAgentBodies(n int) ([][]byte, int) {
	msgs := []map[string]any{{"role": "system", "content": "You work through lists."},
		{"role": "user", "content": "Work through the list, one item per step."}}
	var bodies [][]byte
	received := 0
	for i := 0; i < n; i++ {
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
		bodies = append(bodies, b)
		received += len(msgs) - 1
		msgs = append(msgs, map[string]any{"role": "assistant", "content": fmt.Sprintf("Step %d: item %d is done; the next one needs a closer look.", i, i)},
			map[string]any{"role": "user", "content": "Go on."})
	}
	return bodies, received
}

// BenchmarkProxyLongAgent: recording a conversation costs in proportion to
// what arrives (each request's whole input: reading it, placing it, storing
// what is new), not more. It reports the cost per received message at 400
// calls against 50 (x8), and checks that 400 calls store 800 messages.
func BenchmarkProxyLongAgent(b *testing.B) {
	counter, err := tokens.Get(tokens.Default)
	if err != nil {
		b.Fatal(err)
	}
	run := func(bodies [][]byte) (time.Duration, int) {
		store, up := &memStore{}, &instantUpstream{}
		p := proxy.New(proxy.Config{Upstream: up, Store: store, Counter: counter, Tokenizer: tokens.Default,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		var elapsed time.Duration
		for i, body := range bodies {
			up.answer, _ = json.Marshal(completion(map[string]any{"role": "assistant",
				"content": fmt.Sprintf("Step %d: item %d is done; the next one needs a closer look.", i, i)}, "stop"))
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
			start := time.Now()
			p.ServeChat(httptest.NewRecorder(), req)
			elapsed += time.Since(start)
		}
		s := store.all()
		if len(s) != 1 {
			b.Fatalf("%d sessions for one conversation", len(s))
		}
		stored := 0
		for _, ev := range s[0].events {
			if ev.Type == delegation.EventMessageAdded {
				stored++
			}
		}
		return elapsed, stored
	}
	small, smallN := longAgentBodies(50)
	big, bigN := longAgentBodies(400)
	// The fastest of the runs of each size: on a shared machine the others
	// measure the neighbours too.
	ts, tb := time.Duration(1<<62), time.Duration(1<<62)
	for i := 0; i < b.N; i++ {
		d, stored := run(small)
		if stored != 2*50 {
			b.Fatalf("%d messages stored for 50 calls, want 100: each once", stored)
		}
		ts = min(ts, d)
		d, stored = run(big)
		if stored != 2*400 {
			b.Fatalf("%d messages stored for 400 calls, want 800: each once", stored)
		}
		tb = min(tb, d)
	}
	perSmall := float64(ts) / float64(smallN)
	perBig := float64(tb) / float64(bigN)
	b.ReportMetric(perBig, "ns/received-message")
	b.ReportMetric(perBig/perSmall, "x8/x1")
}

// streamingUpstream streams an answer of n chunks, each flushed as it is
// written, as fast as it can: what a relay adds is what is measured.
func streamingUpstream(chunks map[int][][]byte) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Messages []struct{ Content string } }
		_ = json.NewDecoder(r.Body).Decode(&body)
		var n int
		fmt.Sscanf(body.Messages[len(body.Messages)-1].Content, "Tell it in %d pieces", &n)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks[n] {
			_, _ = w.Write(c)
			w.(http.Flusher).Flush()
		}
	}))
}

func streamChunks(n int) [][]byte {
	var out [][]byte
	for i := 0; i < n; i++ {
		b, _ := json.Marshal(chunk(map[string]any{"content": fmt.Sprintf(" word%d", i)}, nil))
		out = append(out, []byte("data: "+string(b)+"\n\n"))
	}
	b, _ := json.Marshal(chunk(map[string]any{}, "stop"))
	return append(out, []byte("data: "+string(b)+"\n\n"), []byte("data: [DONE]\n\n"))
}

// readStream posts a streaming request for an answer of n pieces and reads
// it to its end: the time to its first piece, and to its last.
func readStream(b *testing.B, url string, run, n int) (first, all time.Duration) {
	body, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "messages": []map[string]any{
		{"role": "user", "content": fmt.Sprintf("Tell it in %d pieces (run %d).", n, run)}}})
	start := time.Now()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 32<<10)
	var last []byte
	for {
		k, err := resp.Body.Read(buf)
		if first == 0 && k > 0 {
			first = time.Since(start)
		}
		if k > 0 {
			last = append(last[:0], buf[:k]...)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	all = time.Since(start)
	if resp.StatusCode != http.StatusOK || !bytes.HasSuffix(last, []byte("data: [DONE]\n\n")) {
		b.Fatalf("status %d, the stream ended with %q", resp.StatusCode, last)
	}
	return first, all
}

// BenchmarkProxyStream: a streamed answer is relayed piece by piece, never
// held until it is whole, so the client's first piece comes as soon for an
// answer of 4,000 pieces as for one of 500 (x8/x1 near 1; a relay that
// buffered would make it x8). It reports too what relaying and recording
// a 4,000-piece stream costs against a bare relay of it (the standard
// library's reverse proxy, flushing each piece, recording nothing), and
// what is added per piece. Each figure is from the fastest of the runs of
// each kind: on a shared machine the others measure the neighbours too.
func BenchmarkProxyStream(b *testing.B) {
	counter, err := tokens.Get(tokens.Default)
	if err != nil {
		b.Fatal(err)
	}
	const small, big = 500, 4000
	up := streamingUpstream(map[int][][]byte{small: streamChunks(small), big: streamChunks(big)})
	defer up.Close()
	hu, err := proxy.NewHTTPUpstream(up.URL+"/v1", "")
	if err != nil {
		b.Fatal(err)
	}
	store := &memStore{}
	p := proxy.New(proxy.Config{Upstream: hu, Store: store, Counter: counter, Tokenizer: tokens.Default,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer p.Close()
	srv := httptest.NewServer(http.HandlerFunc(p.ServeChat))
	defer srv.Close()
	target, _ := url.Parse(up.URL)
	bare := httputil.NewSingleHostReverseProxy(target)
	bare.FlushInterval = -1
	plain := httptest.NewServer(bare)
	defer plain.Close()
	best := func(d *time.Duration, v time.Duration) {
		if *d == 0 || v < *d {
			*d = v
		}
	}
	var firstSmall, firstBig, relayed, direct time.Duration
	for i := 0; i < b.N; i++ {
		// In turns, neither size always first.
		for _, n := range [][2]int{{small, big}, {big, small}}[i%2] {
			f, all := readStream(b, srv.URL, i, n)
			if n == small {
				best(&firstSmall, f)
			} else {
				best(&firstBig, f)
				best(&relayed, all)
			}
		}
		_, all := readStream(b, plain.URL, i, big)
		best(&direct, all)
	}
	// Each stream was recorded, whole.
	sessions := store.all()
	if len(sessions) != 2*b.N {
		b.Fatalf("%d sessions recorded for %d streams", len(sessions), 2*b.N)
	}
	for i, s := range sessions {
		want := fmt.Sprintf(" word%d", small-1)
		if i%2 == 1 != (i/2%2 == 1) {
			want = fmt.Sprintf(" word%d", big-1)
		}
		whole := false
		s.mu.Lock()
		for _, ev := range s.events {
			if ev.Type == delegation.EventMessageAdded {
				_ = ev.Encode()
				whole = whole || bytes.Contains(ev.Data, []byte(want+`"`))
			}
		}
		s.mu.Unlock()
		if !whole {
			b.Fatalf("session %s: no answer recorded that ends with %q", s.id, want)
		}
	}
	b.ReportMetric(float64(firstBig)/float64(firstSmall), "first-piece-x8/x1")
	b.ReportMetric(float64(firstBig.Microseconds()), "µs-first-piece")
	b.ReportMetric(float64(relayed)/float64(direct), "ours/bare-relay")
	b.ReportMetric(float64(relayed-direct)/big, "ns-added/piece")
}

// BenchmarkProxyStreamKeyed measures what keeping the operator's key out
// of a stream split across its events costs: a 4,000-piece stream relayed
// with --upstream-key-env set (each event's text read, held back where it
// could begin the key) against the same stream relayed without a key
// (keyed/unkeyed; the first piece's wait too). Fastest of the runs.
func BenchmarkProxyStreamKeyed(b *testing.B) {
	counter, err := tokens.Get(tokens.Default)
	if err != nil {
		b.Fatal(err)
	}
	const n = 4000
	up := streamingUpstream(map[int][][]byte{n: streamChunks(n)})
	defer up.Close()
	serve := func(key string) string {
		hu, err := proxy.NewHTTPUpstream(up.URL+"/v1", key)
		if err != nil {
			b.Fatal(err)
		}
		p := proxy.New(proxy.Config{Upstream: hu, Store: &memStore{}, Counter: counter, Tokenizer: tokens.Default,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		b.Cleanup(p.Close)
		srv := httptest.NewServer(http.HandlerFunc(p.ServeChat))
		b.Cleanup(srv.Close)
		return srv.URL
	}
	// A key with a character JSON may escape has every event read: the
	// worst case.
	plain, keyed, readAll := serve(""), serve("sk-bench-0123456789abcdef"), serve("sk-bench&0123456789abcdef")
	best := func(d *time.Duration, v time.Duration) {
		if *d == 0 || v < *d {
			*d = v
		}
	}
	var first, all [3]time.Duration
	for i := 0; i < b.N; i++ {
		for j := range 3 {
			k := (i + j) % 3 // in turns, none always first
			f, a := readStream(b, []string{plain, keyed, readAll}[k], i, n)
			best(&first[k], f)
			best(&all[k], a)
		}
	}
	firstPlain, allPlain, firstKeyed, allKeyed := first[0], all[0], first[1], all[1]
	b.ReportMetric(float64(all[2])/float64(allPlain), "every-event-read/unkeyed")
	b.ReportMetric(float64(allKeyed)/float64(allPlain), "keyed/unkeyed")
	b.ReportMetric(float64(firstKeyed)/float64(firstPlain), "first-piece-keyed/unkeyed")
	b.ReportMetric(float64(allKeyed-allPlain)/n, "ns-added/piece")
}
