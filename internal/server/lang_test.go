package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/coder/websocket"

	"github.com/delegationstudio/studio/internal/delegation"
)

func (s *studio) getLang(path, acceptLanguage string) (*http.Response, *goquery.Document) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.ts.URL+path, nil)
	if acceptLanguage != "" {
		req.Header.Set("Accept-Language", acceptLanguage)
	}
	res, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	doc, _ := goquery.NewDocumentFromReader(res.Body)
	return res, doc
}

// TestLanguage: a page is in the language the browser asks for; the switch
// on it links to the same page (its query kept) in the other language, and
// following it sets a cookie that wins over Accept-Language from then on.
func TestLanguage(t *testing.T) {
	s := newStudio(t, "")
	_, doc := s.getLang("/lessons/one-delegation?run=", "zh-CN,zh;q=0.9,en;q=0.8")
	if lang, _ := doc.Find("html").Attr("lang"); lang != "zh-Hans" {
		t.Fatalf("Accept-Language zh-CN: <html lang=%q>", lang)
	}
	if h := doc.Find("h1").Text(); h != "一次委派：每次模型调用收到了什么" {
		t.Errorf("the lesson in Chinese is titled %q", h)
	}
	if src := doc.Find(`[data-testid="source"]`).Text(); !strings.Contains(src, "《task 工具怎么把活派给子 Agent》") || !strings.Contains(src, "§2 派出去之后，子 Agent 手上有什么") {
		t.Errorf("the lesson's source in Chinese: %q", src)
	}
	sw := doc.Find(`[data-testid="lang-switch"] a[data-lang="en"]`)
	href, _ := sw.Attr("href")
	if lang, _ := sw.Attr("lang"); sw.Text() != "English" || lang != "en" {
		t.Errorf("the switch reads %q (lang %q)", sw.Text(), lang)
	}
	u, _ := url.Parse(href)
	if u.Path != "/lessons/one-delegation" || u.Query().Get("lang") != "en" || !u.Query().Has("run") {
		t.Fatalf("the switch goes to %q, not this page in English", href)
	}

	// Following it: the cookie is set and the same page comes back, without ?lang.
	res, _ := s.getLang(href, "zh-CN")
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the switch answers %d", res.StatusCode)
	}
	back, _ := url.Parse(res.Header.Get("Location"))
	if back.Path != "/lessons/one-delegation" || back.Query().Has("lang") || !back.Query().Has("run") {
		t.Errorf("the switch sends the browser to %q", res.Header.Get("Location"))
	}
	_, doc = s.getLang("/", "zh-CN")
	if lang, _ := doc.Find("html").Attr("lang"); lang != "en" {
		t.Errorf("after choosing English, Accept-Language zh still gives lang %q", lang)
	}
	if title := doc.Find("title").Text(); title != "Sessions · Delegation Studio" {
		t.Errorf("title %q", title)
	}

	// A language the studio does not have falls back to the browser's.
	s.c.Jar.SetCookies(u, nil)
	fresh := newStudio(t, "")
	res, _ = fresh.getLang("/?lang=fr", "zh")
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("?lang=fr answers %d", res.StatusCode)
	}
	_, doc = fresh.getLang("/", "")
	if lang, _ := doc.Find("html").Attr("lang"); lang != "zh-Hans" {
		t.Errorf("?lang=fr with Accept-Language zh: lang %q", lang)
	}
	if title := doc.Find("title").Text(); title != "会话 · 委派工作室" {
		t.Errorf("title %q", title)
	}

	// Errors too: a page that is not there, in Chinese.
	res, doc = fresh.getLang("/sessions/nope/messages/x", "")
	if res.StatusCode != http.StatusNotFound || doc.Find("h1").Text() != "404" || doc.Find("title").Text() != "找不到 · 委派工作室" {
		t.Errorf("404 in Chinese: %d %q", res.StatusCode, doc.Find("title").Text())
	}

	// The API is for programs: no language, no redirect.
	res, _ = fresh.getLang("/api/sessions?lang=zh", "zh")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Language") != "" {
		t.Errorf("the API answers %d", res.StatusCode)
	}
}

// TestLiveInTheReadersLanguage: a session page's socket gets its patches in
// its reader's language: two pages of one running session, one in Chinese
// and one in English, each see the session end in their own words. A
// program watching it meanwhile gets each event whole (what it carries,
// the message it introduced), which pages never get, and English patches.
func TestLiveInTheReadersLanguage(t *testing.T) {
	s := newStudio(t, "")
	id := s.startSlow(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := "ws" + strings.TrimPrefix(s.ts.URL, "http") + "/api/sessions/" + id + "/live?after=1"
	type seen struct {
		patches string
		whole   int // lines carrying an event's data or message
	}
	watch := func(url string, header http.Header) seen {
		conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: header})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		var patches strings.Builder
		whole := 0
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			finished := false
			for line := range bytes.SplitSeq(data, []byte("\n")) {
				var ev wireEvent
				if err := json.Unmarshal(line, &ev); err != nil {
					t.Fatal(err)
				}
				for _, p := range ev.Patches {
					patches.WriteString(p.HTML)
				}
				if ev.Data != nil || ev.Message != nil {
					whole++
				}
				finished = finished || ev.Type == string(delegation.EventSessionFinished) || (ev.Type == "sync" && !s.srv.runner.Running(id))
			}
			if finished {
				return seen{patches.String(), whole}
			}
		}
	}
	zh, en, program := make(chan seen, 1), make(chan seen, 1), make(chan seen, 1)
	go func() { zh <- watch(base+"&view=1", http.Header{"Cookie": {langCookie + "=zh"}}) }()
	go func() { en <- watch(base+"&view=1", http.Header{"Accept-Language": {"en-US"}}) }()
	go func() { program <- watch(base, http.Header{"Cookie": {langCookie + "=zh"}}) }()
	szh, sen, sprog := <-zh, <-en, <-program
	inZh, inEn := szh.patches, sen.patches
	if szh.whole+sen.whole > 0 {
		t.Errorf("pages got %d events whole: they read only heads and patches", szh.whole+sen.whole)
	}
	if sprog.whole == 0 {
		t.Errorf("the program's stream carried no event's data or message")
	}
	if m := regexp.MustCompile(`data-status="done"[^>]*>([^<]*)<`).FindStringSubmatch(sprog.patches); m == nil || m[1] != "done" {
		t.Errorf("the program's patches are not the English ones: %q", m)
	}
	status := regexp.MustCompile(`data-status="done"[^>]*>([^<]*)<`)
	if m := status.FindStringSubmatch(inZh); m == nil || m[1] != "完成" || strings.Contains(inZh, "input token") {
		t.Errorf("the Chinese page's patches do not end the session in Chinese: %q", m)
	}
	if m := status.FindStringSubmatch(inEn); m == nil || m[1] != "done" || strings.Contains(inEn, "输入") {
		t.Errorf("the English page's patches: %q", m)
	}
}
