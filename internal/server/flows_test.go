package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/web/templates"
)

// TestTeamLiveCheck: the live check answers, for the form as typed, each
// problem at its field, and none once the field is fixed.
func TestTeamLiveCheck(t *testing.T) {
	s := teamStudio(t)
	v := s.openTeamForm("/teams/new")
	check := func(v url.Values) teamCheck {
		t.Helper()
		res, err := s.c.PostForm(s.ts.URL+"/teams/preview?check=1", v)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out teamCheck
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("check: %d, %v", res.StatusCode, err)
		}
		return out
	}
	bad := teamValues(v, templates.SubKey(0, "name"), "helper", templates.SubKey(0, "description"), "d",
		templates.SubKey(0, "mode"), "fork", templates.SubKey(0, "skills"), "search", "agent.max_steps", "many")
	got := check(bad)
	if got.Built || got.Count != 2 || len(got.Fields[templates.SubKey(0, "skills")]) != 1 || len(got.Fields["agent.max_steps"]) != 1 {
		t.Fatalf("check of a fork with skills and max_steps 'many': %+v", got)
	}
	if !strings.Contains(got.Notice, "2 problems") {
		t.Fatalf("notice %q", got.Notice)
	}
	fixed := check(teamValues(bad, templates.SubKey(0, "skills"), "", "agent.max_steps", "12"))
	if !fixed.Built || fixed.Count != 0 || len(fixed.Fields) != 0 || fixed.Notice != "" || !strings.Contains(fixed.Preview, "task-description") {
		t.Fatalf("check once fixed: %+v", fixed)
	}
}

// TestTeamScriptSkeleton: a team with no script cannot run; the page says
// so and fills in a skeleton that runs.
func TestTeamScriptSkeleton(t *testing.T) {
	s := teamStudio(t)
	id := s.createTeam("name", "solo", "prompt", "Go.", templates.SubKey(0, "name"), "helper", templates.SubKey(0, "description"), "Helps.")
	res, doc := s.form("/teams/"+id, "/teams/"+id+"/run", url.Values{})
	if res.StatusCode != http.StatusBadRequest || doc.Find(`[data-testid="needs-script"]`).Length() != 1 {
		t.Fatalf("run without a script: %d, %s", res.StatusCode, doc.Find(`[data-testid="notice"]`).Text())
	}
	v := s.openTeamForm("/teams/" + id)
	_, page, _ := s.postTeam("/teams/"+id, teamValues(v, "action", "skeleton"))
	script := page.Find(`textarea[name="script"]`).Text()
	var parsed map[string]json.RawMessage
	if err := json.Unmarshal([]byte(script), &parsed); err != nil || parsed["main"] == nil || parsed["helper"] == nil {
		t.Fatalf("skeleton %q: %v", script, err)
	}
	res, _, _ = s.postTeam("/teams/"+id, teamValues(teamFormValues(page.Find(`[data-testid="team-form"]`)), "action", "save"))
	teamIDFrom(t, res)
	res, _ = s.form("/teams/"+id, "/teams/"+id+"/run", url.Values{})
	sid := sessionID(t, res)
	s.waitDone(sid)
}

// TestForeignDocuments: a trace or an OTLP file given as a scenario, and a
// scenario given as a trace, are named in one sentence, at the top.
func TestForeignDocuments(t *testing.T) {
	s := newStudio(t, "")
	for _, c := range []struct{ action, field, doc, want string }{
		{"/sessions", "scenario", `{"resourceSpans": [{"scopeSpans": []}]}`, "OTLP file"},
		{"/sessions", "scenario", `{"format": "delegation-studio.trace", "version": 1}`, "trace the studio exported"},
		{"/traces", "trace", `{"name": "x", "prompt": "go", "script": {"main": [{"content": "ok"}]}}`, "is a scenario"},
	} {
		res, doc := s.form("/", c.action, url.Values{c.field: {c.doc}})
		sum := doc.Find(`main > [data-testid="error-summary"]`)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(sum.Find(`[data-testid="foreign"]`).Text(), c.want) {
			t.Errorf("%s %s: %d, summary %q; want %q", c.action, c.doc, res.StatusCode, sum.Text(), c.want)
		}
		if doc.Find(`[data-testid="errors"]`).Length() != 0 {
			t.Errorf("%s: schema errors listed beside the sentence", c.action)
		}
	}
	res, doc := s.form("/", "/sessions", url.Values{"scenario": {`{"name": "x"}`}})
	sum := doc.Find(`main > [data-testid="error-summary"]`)
	if res.StatusCode != http.StatusBadRequest || sum.Find(`a[href="#scenario-text"]`).Length() == 0 {
		t.Fatalf("a bad scenario: %d, summary %q", res.StatusCode, sum.Text())
	}
}

func TestComparePickerAndNav(t *testing.T) {
	s := newStudio(t, "")
	res, doc := s.get("/compare")
	if res.StatusCode != http.StatusOK || doc.Find(`[data-testid="compare-empty"]`).Length() != 1 {
		t.Fatalf("/compare alone: %d", res.StatusCode)
	}
	if cur := doc.Find(`nav [aria-current="page"]`).Text(); cur != "Compare" {
		t.Fatalf("nav marks %q", cur)
	}
	res, _ = s.form("/lessons/receipt", "/lessons/receipt/run", url.Values{})
	_, ids := s.lessonRunIDs(res)
	_, doc = s.get("/compare")
	href, _ := doc.Find(`[data-testid="compare-pairs"] a`).Attr("href")
	if !strings.Contains(href, "a="+ids[0]) || !strings.Contains(href, "b="+ids[1]) {
		t.Fatalf("the lesson's two runs are not offered: %q", href)
	}
	if doc.Find(`select[name="a"] option[value="`+ids[0]+`"]`).Length() == 0 {
		t.Fatal("the picker does not list the lesson's sessions")
	}
	_, doc = s.get(href)
	if doc.Find(`[data-testid="receipt-pair"].differs`).Length() == 0 || doc.Find(`[data-figure]`).Length() < 5 {
		t.Fatalf("the comparison marks no differing receipt: %s", doc.Find(`[data-testid="receipts"]`).Text())
	}
	res, frag := s.get(href + "&fragment=1")
	if res.StatusCode != http.StatusOK || frag.Find(`[data-testid="compare"]`).Length() != 1 || frag.Find("header").Length() != 0 {
		t.Fatalf("fragment: %d", res.StatusCode)
	}
	if res, _ := s.c.Get(s.ts.URL + "/favicon.ico"); res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("favicon: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

// TestTeamImportOfATrace: a trace or an OTLP file on the team import is
// named in one sentence, and nothing is stored.
func TestTeamImportOfATrace(t *testing.T) {
	s := teamStudio(t)
	res, doc := s.form("/teams", "/teams/import", url.Values{"team": {`{"resourceSpans": []}`}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(doc.Find(`[data-testid="foreign"]`).Text(), "OTLP file, not a team") {
		t.Fatalf("import of an OTLP file: %d, %q", res.StatusCode, doc.Find(`#error-summary`).Text())
	}
	if _, doc := s.get("/teams"); doc.Find(`[data-testid="team-row"]`).Length() != 0 {
		t.Fatal("a team was stored")
	}
}
