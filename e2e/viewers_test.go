package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// Issue 30: the per-session viewer cap had no flag. With
// --max-session-viewers 2 the third viewer of one session gets 429 with
// Retry-After, while a viewer of another session still gets in.
func TestMaxSessionViewersFlag(t *testing.T) {
	s := startStudio(t, "--max-session-viewers", "2")
	slow := `{"name": "slow", "prompt": "p", "script": {"main": [{"content": "a", "delay_ms": 600000}]}}`
	id1, id2 := s.start(t, slow), s.start(t, slow)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	dial := func(id string) (*http.Response, error) {
		c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http")+"/api/sessions/"+id+"/live", nil)
		if err == nil {
			t.Cleanup(func() { c.CloseNow() })
		}
		return res, err
	}
	for i := range 2 {
		if _, err := dial(id1); err != nil {
			t.Fatalf("viewer %d of one session: %v", i+1, err)
		}
	}
	res, err := dial(id1)
	if err == nil || res == nil || res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a third viewer of one session: %v %+v; want 429 with Retry-After", err, res)
	}
	if _, err := dial(id2); err != nil {
		t.Fatalf("a viewer of another session: %v", err)
	}
}
