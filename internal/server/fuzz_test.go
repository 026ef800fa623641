package server

import (
	"net/http"
	"net/url"
	"testing"
)

// FuzzLiveParams sends arbitrary session ids and ?after= values to the live
// endpoint: it answers with a clear 4xx (or upgrades for a real session),
// never a 5xx and never a panic.
func FuzzLiveParams(f *testing.F) {
	f.Add("nope", "0")
	f.Add("../../etc", "-1")
	f.Add("x", "99999999999999999999")
	f.Add("", "abc")
	s := startStudio(f, "")
	f.Fuzz(func(t *testing.T, id, after string) {
		u := s.ts.URL + "/api/sessions/" + url.PathEscape(id) + "/live?after=" + url.QueryEscape(after)
		res, err := http.Get(u)
		if err != nil {
			return // an id that makes no URL
		}
		res.Body.Close()
		if res.StatusCode >= 500 {
			t.Fatalf("%s: status %d", u, res.StatusCode)
		}
	})
}
