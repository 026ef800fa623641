// Package retryafter reads how long a server asks a client to wait before
// it tries again: the one rule for the model adapter and the OTLP pusher.
package retryafter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Parse reads Retry-After-Ms (OpenAI's, in milliseconds) or Retry-After
// (seconds, or an HTTP date relative to now), capped at limit. It reports
// false when the response asks for nothing readable.
func Parse(h http.Header, now time.Time, limit time.Duration) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	var d time.Duration
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		ms, err := strconv.ParseFloat(v, 64)
		if err != nil || ms < 0 {
			return 0, false
		}
		d = time.Duration(ms * float64(time.Millisecond))
	} else if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if s < 0 {
				return 0, false
			}
			d = time.Duration(s * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			d = max(t.Sub(now), 0)
		} else {
			return 0, false
		}
	} else {
		return 0, false
	}
	return min(d, limit), true
}
