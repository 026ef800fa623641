package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The regression tests of issue 21 ("nobody gets in, no secret gets out")
// that are about the binary: each runs the real `studio` and tries what an
// attacker tried.

// listener is an HTTP server that records every request it gets: the
// place a stolen key would be sent.
type listener struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func newListener(t *testing.T) *listener {
	l := &listener{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.auth = append(l.auth, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		l.mu.Unlock()
		http.Error(w, "no", http.StatusTeapot)
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *listener) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.auth...)
}

// post sends a request as a browser on another site would, or a script.
func post(t *testing.T, url string, header map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func sessionsOf(t *testing.T, s *studio, header map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+"/api/sessions", nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var list []json.RawMessage
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatalf("GET /api/sessions = %s: %v", res.Status, err)
	}
	return len(list)
}

// Finding 1: the default studio never checked Host, so a page on a name
// rebound to 127.0.0.1 could start a session whose base_url pointed at the
// attacker, and the studio sent its OPENAI_API_KEY there.
func TestDNSRebindingGetsNothing(t *testing.T) {
	l := newListener(t)
	s := startStudioEnv(t, []string{"OPENAI_API_KEY=sk-e2e-must-stay-home"})
	port := s.URL[strings.LastIndexByte(s.URL, ':')+1:]
	attacker := "attacker.example:" + port
	scenario := `{"name": "steal", "prompt": "hi", "model": {"provider": "openai", "model": "m", "base_url": "` + l.URL + `/v1"}}`

	res, body := post(t, s.URL+"/api/sessions", map[string]string{"Host": attacker, "Origin": "http://" + attacker}, scenario)
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("the rebinding request: %s %s", res.Status, body)
	}
	// Even from a script on this machine, a scenario cannot say where the
	// studio's calls go.
	res, body = post(t, s.URL+"/api/sessions", nil, scenario)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"field":"model.base_url"`) {
		t.Fatalf("a scenario with its own base_url: %s %s", res.Status, body)
	}
	if got := l.requests(); len(got) != 0 {
		t.Fatalf("the listener was sent %v", got)
	}
	if n := sessionsOf(t, s, nil); n != 0 {
		t.Fatalf("%d sessions were stored", n)
	}
}

// Finding 2: api_key_env could name any variable (STUDIO_TOKEN was sent out).
func TestScenarioNamingStudioTokenIsRefused(t *testing.T) {
	const token = "e2e-3f9a2c71d84b6e05-token"
	l := newListener(t)
	s := startStudioEnv(t, []string{"STUDIO_TOKEN=" + token, "E2E_API_KEY=sk-e2e-configured"},
		"--endpoint", "mine="+l.URL+"/v1,E2E_API_KEY,m")
	auth := map[string]string{"Authorization": "Bearer " + token}
	for _, c := range []struct{ doc, field string }{
		{`{"name": "steal", "prompt": "hi", "model": {"endpoint": "mine", "api_key_env": "STUDIO_TOKEN"}}`, "model.api_key_env"},
		{`{"name": "steal", "prompt": "hi", "model": {"endpoint": "mine"}, "subagents": [{"name": "s", "description": "d", "api_key_env": "AWS_SECRET_ACCESS_KEY"}]}`, "subagents[0].api_key_env"},
		{`{"name": "steal", "prompt": "hi", "model": {"endpoint": "mine", "api_key_env": "E2E_API_KEY"}}`, "model.api_key_env"},
	} {
		res, body := post(t, s.URL+"/api/sessions", auth, c.doc)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"field":"`+c.field+`"`) {
			t.Fatalf("%s: %s %s", c.doc, res.Status, body)
		}
	}
	if got := l.requests(); len(got) != 0 {
		t.Fatalf("the listener was sent %v", got)
	}
	// Naming the configured endpoint works, with the key configured for it.
	res, body := post(t, s.URL+"/api/sessions", auth, `{"name": "ok", "prompt": "hi", "model": {"endpoint": "mine"}}`)
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("naming the endpoint: %s %s", res.Status, body)
	}
	deadline := time.Now().Add(waitLimit)
	for len(l.requests()) == 0 && time.Now().Before(deadline) {
		time.Sleep(25 * time.Millisecond)
	}
	for _, r := range l.requests() {
		if !strings.HasSuffix(r, "Bearer sk-e2e-configured") {
			t.Fatalf("the endpoint was sent %q", r)
		}
	}
	if len(l.requests()) == 0 {
		t.Fatal("the configured endpoint was never called")
	}
}

// rss is a process's peak resident memory, in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmHWM")
	return 0
}

// Finding 3: a 2.2 MB scenario of unknown keys took 31 s and 48 GB.
func TestUnknownKeyBombIsAnsweredAtOnce(t *testing.T) {
	s := startStudio(t)
	var b strings.Builder
	b.WriteString(`{"name": "bomb", "prompt": "p", "script": {"main": [{"content": "a"}]}`)
	for i := 0; b.Len() < 2<<20; i++ {
		fmt.Fprintf(&b, `, "unknown_key_%012d": 1`, i)
	}
	b.WriteString("}")
	before := rss(t, s.pid)
	start := time.Now()
	res, body := post(t, s.URL+"/api/sessions", nil, b.String())
	took := time.Since(start)
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %s", res.Status)
	}
	var out struct {
		Errors []struct{ Field, Message string }
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 51 || !strings.Contains(out.Errors[50].Message, "more problems not listed") {
		t.Fatalf("%d errors, the last %v", len(out.Errors), out.Errors[len(out.Errors)-1])
	}
	grew := rss(t, s.pid) - before
	t.Logf("a %d-byte bomb answered in %v; peak memory grew %d MB", b.Len(), took, grew>>20)
	// Generous for a loaded machine: the old reporter took minutes and
	// tens of gigabytes.
	if took > 10*time.Second || grew > 512<<20 {
		t.Fatalf("the bomb took %v and %d MB", took, grew>>20)
	}
}

// Findings 5 and 6 through the API: a glob bomb and a $ref to a host file.
func TestGlobBombAndHostFileRef(t *testing.T) {
	s := startStudio(t)
	t.Run("a $ref to a host file is refused", func(t *testing.T) {
		doc := `{"name": "ref", "prompt": "p", "script": {"main": [{"content": "a"}]}, "subagents": [{"name": "r", "description": "d",
			"response_format": {"title": "A", "type": "object", "properties": {"x": {"$ref": "/etc/passwd"}}}}]}`
		res, body := post(t, s.URL+"/api/sessions", nil, doc)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "points outside it") || strings.Contains(body, "invalid character") {
			t.Fatalf("%s %s", res.Status, body)
		}
	})
	t.Run("a glob bomb finishes at once", func(t *testing.T) {
		files := map[string]string{}
		for i := range 50 {
			files[fmt.Sprintf("/%d/%s", i, strings.Repeat("a", 4000))] = "x"
		}
		script := map[string]any{"main": []any{
			map[string]any{"tool_calls": []any{
				map[string]any{"name": "glob", "args": map[string]any{"pattern": strings.Repeat("*", 4000) + "b"}},
				map[string]any{"name": "grep", "args": map[string]any{"pattern": "x", "glob": "**" + strings.Repeat("*a", 126) + "b"}},
				map[string]any{"name": "read_file", "args": map[string]any{"file_path": "/" + strings.Repeat("a", 100<<10)}},
			}},
			map[string]any{"content": "done"},
		}}
		doc, _ := json.Marshal(map[string]any{"name": "glob", "prompt": "p", "files": files, "script": script})
		id := s.start(t, string(doc))
		start := time.Now()
		s.waitDone(t, id)
		t.Logf("done in %v", time.Since(start))
	})
}

// Finding 9: the CLI printed a prompt's terminal escape sequences raw.
func TestCLIPrintsNoRawEscape(t *testing.T) {
	p := filepath.Join(t.TempDir(), "esc.json")
	doc := `{"name": "esc\u001b[31m", "prompt": "hi \u001b]0;x\u0007 there", "script": {"main": [{"content": "bye \u001b[2J\u009b1m"}]}}`
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(studioBin, "run", p)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("studio run: %v\n%s", err, errOut.String())
	}
	if strings.ContainsAny(out.String()+errOut.String(), "\x1b\x07\u009b") {
		t.Fatalf("raw escapes in the output: %q", out.String())
	}
	if !strings.Contains(out.String(), `prompt: hi \u001b]0;x\u0007 there`) {
		t.Fatalf("the prompt is not shown, escaped: %s", out.String())
	}
}

// Finding 8: 300 slow-body connections stayed open; past the cap a
// connection now gets 503 at once.
func TestConnectionsPastTheCapGet503(t *testing.T) {
	s := startStudio(t, "--max-connections", "4")
	addr := strings.TrimPrefix(s.URL, "http://")
	// Slow bodies, one after the other, until one is refused: headers, then
	// nothing. A held one answers nothing; a refused one answers at once.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	refused := false
	for range 20 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		fmt.Fprintf(c, "POST /api/sessions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", addr)
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue // held
		}
		if err != nil || res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
			t.Fatalf("connection %d: %v %+v", len(held), err, res)
		}
		refused = true
		break
	}
	if !refused || len(held) < 4 {
		t.Fatalf("refused %v after %d connections; want the fifth or later refused", refused, len(held))
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	// Once they close, the studio serves again.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(waitLimit)
	for {
		res, err := client.Get(s.URL + "/api/sessions")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not served once the slow connections closed: %v %v", err, res)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
