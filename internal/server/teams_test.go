package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/tokens"
	"github.com/delegationstudio/studio/web/templates"
)

// teamStudio is a studio for the team editor's tests.
func teamStudio(t *testing.T) *studio {
	t.Helper()
	return newStudio(t, "")
}

// teamFormValues is what a browser would send for a form as rendered, its
// buttons aside: inputs, checked boxes, selected options, textareas.
func teamFormValues(form *goquery.Selection) url.Values {
	v := url.Values{}
	form.Find("input, textarea, select").Each(func(_ int, el *goquery.Selection) {
		name, ok := el.Attr("name")
		if !ok || name == "" {
			return
		}
		switch goquery.NodeName(el) {
		case "textarea":
			v.Add(name, el.Text())
		case "select":
			opt := el.Find("option[selected]").First()
			if opt.Length() == 0 {
				opt = el.Find("option").First()
			}
			val, _ := opt.Attr("value")
			v.Add(name, val)
		default:
			switch typ, _ := el.Attr("type"); typ {
			case "checkbox", "radio":
				if _, on := el.Attr("checked"); on {
					val, ok := el.Attr("value")
					if !ok {
						val = "on"
					}
					v.Add(name, val)
				}
			case "submit", "button", "file":
			default:
				val, _ := el.Attr("value")
				v.Add(name, val)
			}
		}
	})
	return v
}

// openTeamForm loads a page and returns its team form's values.
func (s *studio) openTeamForm(path string) url.Values {
	s.t.Helper()
	res, doc := s.get(path)
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("GET %s: status %d", path, res.StatusCode)
	}
	form := doc.Find(`[data-testid="team-form"]`)
	if form.Length() != 1 {
		s.t.Fatalf("no team form on %s", path)
	}
	return teamFormValues(form)
}

// postTeam posts values as they are (the CSRF token among them).
func (s *studio) postTeam(action string, values url.Values) (*http.Response, *goquery.Document, string) {
	s.t.Helper()
	res, err := s.c.PostForm(s.ts.URL+action, values)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	return res, doc, string(body)
}

func teamValues(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

// addSubagent sets subagent i's fields: name, description, mode.
func teamSubagent(v url.Values, i int, name, desc, mode string) url.Values {
	p := "subagents[" + strconv.Itoa(i) + "]."
	return teamValues(v, p+"name", name, p+"description", desc, p+"mode", mode)
}

func teamIDFrom(t testing.TB, res *http.Response) string {
	t.Helper()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d, want 303", res.StatusCode)
	}
	id, ok := strings.CutPrefix(res.Header.Get("Location"), "/teams/")
	id, _, _ = strings.Cut(id, "?") // ?saved=1 after a save
	if !ok || id == "" || strings.Contains(id, "/") {
		t.Fatalf("redirect to %q, want a team page", res.Header.Get("Location"))
	}
	return id
}

// createTeam saves a new team from values laid over the new-team form.
func (s *studio) createTeam(kv ...string) string {
	s.t.Helper()
	v := teamValues(s.openTeamForm("/teams/new"), kv...)
	v.Set("action", "save")
	res, doc, _ := s.postTeam("/teams", v)
	if res.StatusCode != http.StatusSeeOther {
		s.t.Fatalf("save: status %d: %s", res.StatusCode, doc.Find(`.field-errors, [data-testid="errors"]`).Text())
	}
	return teamIDFrom(s.t, res)
}

func teamFieldError(doc *goquery.Document, field string) string {
	return doc.Find(`[data-testid="field-error"][data-field="` + field + `"]`).Text()
}

func TestTeamCreateThroughTheForm(t *testing.T) {
	s := teamStudio(t)
	if _, doc := s.get("/teams"); doc.Find(`[data-testid="no-teams"]`).Length() != 1 {
		t.Fatal("a new studio lists teams")
	}
	v := s.openTeamForm("/teams/new")
	t.Run("a new team has the default stack and general-purpose", func(t *testing.T) {
		if got, want := v["agent.tools"], delegation.DefaultTools(); !slices.Equal(got, want) {
			t.Fatalf("tools checked = %v, want %v", got, want)
		}
		if v.Get("agent.general_purpose") != "on" {
			t.Fatal("general-purpose is off in a new team")
		}
	})

	v = teamValues(v, "name", "researchers", "title", "Two kinds of help", "agent.system_prompt", "You plan; helpers research.")
	v.Set("action", "add")
	res, doc, _ := s.postTeam("/teams", v)
	if res.StatusCode != http.StatusOK || doc.Find(`[data-testid="subagent"]`).Length() != 1 {
		t.Fatalf("add: status %d, %d subagents", res.StatusCode, doc.Find(`[data-testid="subagent"]`).Length())
	}
	v = teamFormValues(doc.Find(`[data-testid="team-form"]`))
	if v.Get("name") != "researchers" || v.Get("agent.system_prompt") != "You plan; helpers research." {
		t.Fatalf("adding a subagent lost what was typed: %v", v)
	}
	v = teamSubagent(v, 0, "researcher", "Researches one question and returns a paragraph.", "isolated")
	v["subagents[0].tools"] = []string{"read_file", "grep"}
	v = teamValues(v, "subagents[0].skills", "search, cite", "subagents[0].max_steps", "12",
		"subagents[0].response_format", `{"title": "Finding", "type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}`)
	v.Set("action", "save")
	res, _, _ = s.postTeam("/teams", v)
	id := teamIDFrom(t, res)

	t.Run("the team page shows what was saved", func(t *testing.T) {
		got := s.openTeamForm("/teams/" + id)
		for _, k := range []string{"name", "title", "agent.system_prompt", "subagents[0].name", "subagents[0].description",
			"subagents[0].mode", "subagents[0].skills", "subagents[0].max_steps"} {
			if got.Get(k) != v.Get(k) {
				t.Errorf("%s = %q, want %q", k, got.Get(k), v.Get(k))
			}
		}
		if !slices.Equal(got["subagents[0].tools"], []string{"read_file", "grep"}) {
			t.Errorf("subagent tools = %v", got["subagents[0].tools"])
		}
		if !strings.Contains(got.Get("subagents[0].response_format"), `"title": "Finding"`) {
			t.Errorf("response_format = %q", got.Get("subagents[0].response_format"))
		}
	})
	t.Run("the stored team is a scenario document", func(t *testing.T) {
		tm, err := s.db.Team(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var f scenario.File
		if err := json.Unmarshal(tm.Scenario, &f); err != nil {
			t.Fatal(err)
		}
		if f.Name != "researchers" || len(f.Subagents) != 1 || f.Subagents[0].MaxSteps != 12 ||
			!slices.Equal(f.Subagents[0].Skills, []string{"search", "cite"}) || f.Agent == nil || f.Agent.Tools != nil {
			t.Fatalf("stored %s", tm.Scenario)
		}
	})
	t.Run("the list shows it", func(t *testing.T) {
		_, doc := s.get("/teams")
		row := doc.Find(`[data-testid="team-row"][data-team="` + id + `"]`)
		if row.Length() != 1 || !strings.Contains(row.Text(), "researchers") {
			t.Fatalf("teams list: %s", doc.Find(`[data-testid="teams"]`).Text())
		}
	})
	t.Run("saving again updates it", func(t *testing.T) {
		up := teamValues(s.openTeamForm("/teams/"+id), "title", "Renamed", "action", "save")
		res, _, _ := s.postTeam("/teams/"+id, up)
		if got := teamIDFrom(t, res); got != id {
			t.Fatalf("saved to %s, want %s", got, id)
		}
		if tm, _ := s.db.Team(context.Background(), id); tm.Title != "Renamed" {
			t.Fatalf("title = %q", tm.Title)
		}
		if list, _ := s.db.Teams(context.Background()); len(list) != 1 {
			t.Fatalf("%d teams after an update, want 1", len(list))
		}
	})
	t.Run("an unknown team is a 404", func(t *testing.T) {
		if res, _ := s.get("/teams/nope"); res.StatusCode != http.StatusNotFound {
			t.Fatalf("status %d", res.StatusCode)
		}
	})
}

// TestTeamValidation is delegation.md §2: every spec error, found when the
// team is built, reported at once, each at its field, with what was typed
// kept.
func TestTeamValidation(t *testing.T) {
	s := teamStudio(t)
	base := s.openTeamForm("/teams/new")
	v := teamValues(base, "name", "broken", "agent.max_steps", "many", "script", `{"main": [`)
	v["agent.tools"] = append(v["agent.tools"], "search")
	v = teamSubagent(v, 0, "a", "First.", "shared")
	v = teamSubagent(v, 1, "a", "Second.", "fork")
	v.Set("subagents[1].skills", "web, math")
	v = teamSubagent(v, 2, "b", "Third.", "isolated")
	v.Set("subagents[2].response_format", `"a string"`)
	v["subagents[2].tools"] = []string{"read_file", "search"}
	v = teamSubagent(v, 3, "c", "Fourth.", "isolated")
	v.Set("subagents[3].response_format", `{not json`)
	v.Set("subagents[3].max_steps", "ten")
	v.Set("action", "save")

	res, doc, _ := s.postTeam("/teams", v)
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", res.StatusCode)
	}
	stack := strings.Join(delegation.StackToolNames(), ", ")
	for field, want := range map[string]string{
		"subagents[0].mode":            "SubAgent 'a' has invalid mode 'shared'; expected 'isolated' or 'fork'",
		"subagents[1].name":            "Duplicate subagent name 'a'; each subagent must have a unique name.",
		"subagents[1].skills":          "SubAgent 'a' cannot set skills under mode='fork'; the parent's skills are inherited instead.",
		"subagents[2].response_format": "SubAgent 'b' has unsupported response_format of type string",
		"subagents[2].tools":           "SubAgent 'b' has unknown tool 'search'; the tools are " + stack,
		"agent.tools":                  "unknown tool 'search'; the tools are " + stack,
		"subagents[3].response_format": "SubAgent 'c' has a response_format that is not valid JSON",
		"subagents[3].max_steps":       "max_steps must be a whole number; got 'ten'",
		"agent.max_steps":              "max_steps must be a whole number; got 'many'",
		"script":                       "the script is not valid JSON",
	} {
		if got := teamFieldError(doc, field); !strings.Contains(got, want) {
			t.Errorf("at %s: %q, want %q", field, got, want)
		}
	}
	if top := doc.Find(`[data-testid="errors"]`).Text(); top != "" {
		t.Errorf("problems with no field of their own: %q", top)
	}
	t.Run("everything typed is kept", func(t *testing.T) {
		got := teamFormValues(doc.Find(`[data-testid="team-form"]`))
		for k, want := range v {
			if k == "action" || k == "_csrf" {
				continue
			}
			if !slices.Equal(got[k], want) {
				t.Errorf("%s = %q, want %q", k, got[k], want)
			}
		}
	})
	t.Run("nothing is written", func(t *testing.T) {
		if list, _ := s.db.Teams(context.Background()); len(list) != 0 {
			t.Fatalf("%d teams stored", len(list))
		}
	})

	t.Run("compat deepagents with files_merge delta is an error at files_merge", func(t *testing.T) {
		v := teamValues(base, "name", "both-ways", "agent.compat", "deepagents", "agent.files_merge", "delta", "action", "save")
		res, doc, _ := s.postTeam("/teams", v)
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", res.StatusCode)
		}
		if got := teamFieldError(doc, "agent.files_merge"); !strings.Contains(got, "contradicts compat 'deepagents'") {
			t.Fatalf("at agent.files_merge: %q", got)
		}
		if got := teamFormValues(doc.Find(`[data-testid="team-form"]`)).Get("agent.compat"); got != "deepagents" {
			t.Fatalf("compat typed %q, kept %q", "deepagents", got)
		}
	})
	t.Run("general-purpose off with no subagent", func(t *testing.T) {
		v := teamValues(base, "name", "nobody", "action", "save")
		v.Del("agent.general_purpose")
		res, doc, _ := s.postTeam("/teams", v)
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", res.StatusCode)
		}
		if got := teamFieldError(doc, "subagents"); !strings.Contains(got, "At least one subagent must be specified") {
			t.Fatalf("at subagents: %q", got)
		}
		if got := teamFormValues(doc.Find(`[data-testid="team-form"]`)); got.Get("agent.general_purpose") != "" || got.Get("name") != "nobody" {
			t.Fatalf("the form came back changed: %v", got)
		}
	})

	t.Run("fixed, it saves", func(t *testing.T) {
		fixed := teamValues(v, "agent.max_steps", "40", "script", `{"main": [{"content": "Done."}]}`,
			"subagents[0].mode", "isolated", "subagents[1].name", "a2", "subagents[1].skills", "",
			"subagents[2].response_format", `{"title": "Report", "type": "object", "properties": {"answer": {"type": "string"}}}`,
			"subagents[3].response_format", "", "subagents[3].max_steps", "5")
		fixed["agent.tools"] = delegation.DefaultTools()
		fixed["subagents[2].tools"] = []string{"read_file"}
		res, _, _ := s.postTeam("/teams", fixed)
		id := teamIDFrom(t, res)
		if _, err := s.db.Team(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	})
}

// previewOf posts a form's values to the live preview.
func (s *studio) teamPreviewOf(v url.Values) (*goquery.Document, string, int, int) {
	s.t.Helper()
	res, doc, _ := s.postTeam("/teams/preview", v)
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("preview: status %d", res.StatusCode)
	}
	size := doc.Find(`[data-testid="task-size"]`)
	chars, _ := strconv.Atoi(size.AttrOr("data-chars", "-1"))
	toks, _ := strconv.Atoi(size.AttrOr("data-tokens", "-1"))
	return doc, doc.Find(`[data-testid="task-description"]`).Text(), chars, toks
}

func descLines(s string) []string { return strings.Split(s, "\n") }

// TestTeamPreview is delegation.md §3 as the editor shows it: the task
// tool's description with one line per subagent, built by the engine.
func TestTeamPreview(t *testing.T) {
	s := teamStudio(t)
	base := teamValues(s.openTeamForm("/teams/new"), "name", "preview")
	_, desc0, chars0, toks0 := s.teamPreviewOf(base)
	gpLine := "- general-purpose: " + delegation.GeneralPurpose.Description
	if !slices.Contains(descLines(desc0), gpLine) || chars0 <= 0 || toks0 <= 0 {
		t.Fatalf("default preview: %d chars, %d tokens:\n%s", chars0, toks0, desc0)
	}

	withResearcher := teamSubagent(base, 0, "researcher", "Researches one question and returns a paragraph.", "isolated")
	doc, desc1, chars1, toks1 := s.teamPreviewOf(withResearcher)
	t.Run("adding a researcher adds its line, and size", func(t *testing.T) {
		if !slices.Contains(descLines(desc1), "- researcher: Researches one question and returns a paragraph.") {
			t.Fatalf("no researcher line:\n%s", desc1)
		}
		if chars1 <= chars0 || toks1 <= toks0 {
			t.Fatalf("size went from %d chars, %d tokens to %d, %d", chars0, toks0, chars1, toks1)
		}
		if got, want := chars1, len([]rune(desc1)); got != want {
			t.Fatalf("chars = %d, the description has %d", got, want)
		}
	})
	t.Run("it is the engine's description, and the engine's tool costs", func(t *testing.T) {
		team, err := delegation.BuildTeam(delegation.TeamSpec{Subagents: []delegation.Spec{
			{Name: "researcher", Description: "Researches one question and returns a paragraph.", Mode: delegation.ModeIsolated}}})
		if err != nil {
			t.Fatal(err)
		}
		counter, _ := tokens.Get("")
		rows := doc.Find(`[data-testid="tool-costs"] tbody tr`)
		defs := team.MainTools()
		if rows.Length() != len(defs) {
			t.Fatalf("%d rows for %d tools", rows.Length(), len(defs))
		}
		total := 0
		for i, def := range defs {
			n := counter.Count(delegation.ToolJSON(def))
			total += n
			row := rows.Eq(i)
			if row.AttrOr("data-tool", "") != def.Name || strings.TrimSpace(row.Find("td.num").Text()) != strconv.Itoa(n) {
				t.Errorf("row %d = %q, want %s with %d tokens", i, row.Text(), def.Name, n)
			}
			if def.Name == delegation.TaskToolName && def.Description != desc1 {
				t.Errorf("the preview is not the task tool's description:\n%s\nwant:\n%s", desc1, def.Description)
			}
		}
		if got := doc.Find(`[data-testid="tool-total"]`).Text(); got != strconv.Itoa(total) && got != teamThousands(total) {
			t.Errorf("total = %q, want %d", got, total)
		}
		if toks1 != counter.Count(desc1) {
			t.Errorf("tokens = %d, want %d", toks1, counter.Count(desc1))
		}
	})
	t.Run("write_todos' section of the system prompt is counted with the tools", func(t *testing.T) {
		v := teamValues(withResearcher)
		v["agent.tools"] = append(delegation.DefaultTools(), delegation.WriteTodosToolName)
		withTodos, _, _, _ := s.teamPreviewOf(v)
		counter, _ := tokens.Get("")
		section := counter.Count("\n\n" + delegation.TodoSystemPrompt)
		if got := strings.TrimSpace(withTodos.Find(`[data-testid="todo-section"] td.num`).Text()); got != strconv.Itoa(section) {
			t.Fatalf("the section's row = %q, want %d tokens", got, section)
		}
		total := section
		withTodos.Find(`[data-testid="tool-costs"] tbody tr[data-tool]`).Each(func(_ int, row *goquery.Selection) {
			n, _ := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(row.Find("td.num").Text()), ",", ""))
			total += n
		})
		if got := withTodos.Find(`[data-testid="tool-total"]`).Text(); got != strconv.Itoa(total) && got != teamThousands(total) {
			t.Errorf("total = %q, want %d with the section", got, total)
		}
	})
	t.Run("without write_todos there is no section", func(t *testing.T) {
		if doc.Find(`[data-testid="todo-section"]`).Length() != 0 {
			t.Error("a section row without write_todos")
		}
	})
	t.Run("a fork's line ends with the fork suffix", func(t *testing.T) {
		_, desc, _, _ := s.teamPreviewOf(teamValues(withResearcher, "subagents[0].mode", "fork"))
		want := "- researcher: Researches one question and returns a paragraph." + delegation.ForkSuffix
		if !slices.Contains(descLines(desc), want) {
			t.Fatalf("no %q in:\n%s", want, desc)
		}
		if strings.Contains(desc1, delegation.ForkSuffix) {
			t.Fatal("an isolated subagent's line has the fork suffix")
		}
	})
	t.Run("overriding general-purpose drops the default line", func(t *testing.T) {
		_, desc, _, _ := s.teamPreviewOf(teamSubagent(withResearcher, 1, "general-purpose", "My own helper.", "isolated"))
		if slices.Contains(descLines(desc), gpLine) || !slices.Contains(descLines(desc), "- general-purpose: My own helper.") {
			t.Fatalf("declared general-purpose:\n%s", desc)
		}
		off := teamValues(withResearcher)
		off.Del("agent.general_purpose")
		_, desc, _, _ = s.teamPreviewOf(off)
		if strings.Contains(desc, "- general-purpose:") || !strings.Contains(desc, "- researcher:") {
			t.Fatalf("general-purpose off:\n%s", desc)
		}
	})
	t.Run("the tokenizer is the team's", func(t *testing.T) {
		_, desc, _, toks := s.teamPreviewOf(teamValues(withResearcher, "tokenizer", "approx"))
		approx, _ := tokens.Get("approx")
		if toks != approx.Count(desc) || toks == toks1 {
			t.Fatalf("approx tokens = %d, want %d (o200k: %d)", toks, approx.Count(desc), toks1)
		}
	})
	t.Run("a team that does not build says why", func(t *testing.T) {
		doc, _, _, _ := s.teamPreviewOf(teamSubagent(base, 0, "x", "d", "shared"))
		if got := doc.Find(`[data-testid="preview-problems"]`).Text(); !strings.Contains(got, "invalid mode 'shared'") {
			t.Fatalf("problems = %q", got)
		}
	})
	t.Run("without JavaScript the Preview button re-renders the page", func(t *testing.T) {
		res, doc, _ := s.postTeam("/teams", teamValues(withResearcher, "action", "preview"))
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
		if got := doc.Find(`[data-testid="preview"] [data-testid="task-description"]`).Text(); got != desc1 {
			t.Fatalf("page preview:\n%s", got)
		}
		if list, _ := s.db.Teams(context.Background()); len(list) != 0 {
			t.Fatal("preview saved the team")
		}
	})
	t.Run("the preview needs the form's CSRF token", func(t *testing.T) {
		v := teamValues(base)
		v.Del("_csrf")
		if res, _, _ := s.postTeam("/teams/preview", v); res.StatusCode != http.StatusForbidden {
			t.Fatalf("status %d, want 403", res.StatusCode)
		}
	})
	t.Run("the prompt sizes are counted", func(t *testing.T) {
		prompt := "You are careful."
		doc, _, _, _ := s.teamPreviewOf(teamValues(withResearcher, "subagents[0].system_prompt", prompt))
		counter, _ := tokens.Get("")
		want := strconv.Itoa(len(prompt)) + " characters · " + strconv.Itoa(counter.Count(prompt)) + " tokens"
		if got := doc.Find(`[data-prompt-size="subagents[0].system_prompt"] .size-text`).Text(); got != want {
			t.Fatalf("size = %q, want %q", got, want)
		}
	})
}

func teamThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func teamSubagentNames(doc *goquery.Document) []string {
	v := teamFormValues(doc.Find(`[data-testid="team-form"]`))
	var names []string
	for i := 0; v.Has("subagents[" + strconv.Itoa(i) + "].name"); i++ {
		names = append(names, v.Get("subagents["+strconv.Itoa(i)+"].name")+"/"+v.Get("subagents["+strconv.Itoa(i)+"].description"))
	}
	return names
}

func TestTeamSubagentButtons(t *testing.T) {
	s := teamStudio(t)
	v := teamValues(s.openTeamForm("/teams/new"), "name", "order", "prompt", "typed prompt")
	v = teamSubagent(v, 0, "a", "A.", "isolated")
	v = teamSubagent(v, 1, "b", "B.", "fork")
	v = teamSubagent(v, 2, "c", "C.", "isolated")
	v["subagents[2].tools"] = []string{"grep"}

	for _, c := range []struct {
		action string
		want   []string
	}{
		{"up:2", []string{"a/A.", "c/C.", "b/B."}},
		{"down:0", []string{"b/B.", "a/A.", "c/C."}},
		{"remove:1", []string{"a/A.", "c/C."}},
		{"add", []string{"a/A.", "b/B.", "c/C.", "/"}},
		{"up:0", []string{"a/A.", "b/B.", "c/C."}},
		{"down:2", []string{"a/A.", "b/B.", "c/C."}},
	} {
		t.Run(c.action, func(t *testing.T) {
			res, doc, _ := s.postTeam("/teams", teamValues(v, "action", c.action))
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
			if got := teamSubagentNames(doc); !slices.Equal(got, c.want) {
				t.Fatalf("subagents = %v, want %v", got, c.want)
			}
			got := teamFormValues(doc.Find(`[data-testid="team-form"]`))
			if got.Get("prompt") != "typed prompt" || got.Get("name") != "order" {
				t.Fatalf("lost what was typed: %v", got)
			}
			// c keeps its own tools and b its mode, wherever they moved.
			for i := 0; got.Has(templates.SubKey(i, "name")); i++ {
				switch got.Get(templates.SubKey(i, "name")) {
				case "c":
					if !slices.Equal(got[templates.SubKey(i, "tools")], []string{"grep"}) {
						t.Errorf("c's tools = %v", got[templates.SubKey(i, "tools")])
					}
				case "b":
					if got.Get(templates.SubKey(i, "mode")) != "fork" {
						t.Errorf("b's mode = %q", got.Get(templates.SubKey(i, "mode")))
					}
				}
			}
			if doc.Find(`[data-testid="subagent"]`).First().Find(`[data-testid="up"][disabled]`).Length() != 1 {
				t.Error("the first subagent can move up")
			}
			if doc.Find(`[data-testid="subagent"]`).Last().Find(`[data-testid="down"][disabled]`).Length() != 1 {
				t.Error("the last subagent can move down")
			}
		})
	}
	if list, _ := s.db.Teams(context.Background()); len(list) != 0 {
		t.Fatal("a button other than save stored the team")
	}
	t.Run("an unknown action is refused", func(t *testing.T) {
		if res, _, _ := s.postTeam("/teams", teamValues(v, "action", "explode:1")); res.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d", res.StatusCode)
		}
	})
}

// postMultipart sends a form with a file, as the import form does.
func (s *studio) postTeamMultipart(action string, fields map[string]string, fileField, fileName string, file []byte) *http.Response {
	s.t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for k, v := range fields {
		_ = w.WriteField(k, v)
	}
	fw, _ := w.CreateFormFile(fileField, fileName)
	_, _ = fw.Write(file)
	_ = w.Close()
	req, _ := http.NewRequest("POST", s.ts.URL+action, &body)
	req.Header.Set("Content-Type", w.FormDataContentType())
	res, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	res.Body.Close()
	return res
}

func (s *studio) exportTeam(id string) []byte {
	s.t.Helper()
	res, body := s.api("GET", "/teams/"+id+"/export", "", nil)
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("export: status %d", res.StatusCode)
	}
	if cd := res.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") || !strings.Contains(cd, ".json") {
		s.t.Fatalf("Content-Disposition = %q", cd)
	}
	return body
}

func TestTeamDuplicateDeleteExportImport(t *testing.T) {
	s := teamStudio(t)
	id := s.createTeam("name", "writers", "title", "Writers", "prompt", "Write it.",
		"subagents[0].name", "drafter", "subagents[0].description", "Drafts.", "subagents[0].mode", "fork",
		"files", `{"/brief.md": "the brief"}`, "script", `{"main": [{"content": "ok"}]}`)
	ctx := context.Background()

	exported := s.exportTeam(id)
	t.Run("the export is a scenario that parses", func(t *testing.T) {
		sc, err := scenario.Parse(exported)
		if err != nil {
			t.Fatalf("%v\n%s", err, exported)
		}
		if sc.File.Name != "writers" || len(sc.File.Subagents) != 1 || sc.File.Subagents[0].Mode != "fork" || sc.File.Files["/brief.md"] != "the brief" {
			t.Fatalf("exported %s", exported)
		}
	})

	t.Run("duplicate", func(t *testing.T) {
		res, _ := s.form("/teams", "/teams/"+id+"/duplicate", url.Values{})
		dup := teamIDFrom(t, res)
		if dup == id {
			t.Fatal("the duplicate is the same team")
		}
		if got := s.openTeamForm("/teams/" + dup); got.Get("name") != "writers-copy" || got.Get("subagents[0].name") != "drafter" {
			t.Fatalf("duplicate: %v", got)
		}
		if list, _ := s.db.Teams(ctx); len(list) != 2 {
			t.Fatalf("%d teams", len(list))
		}
	})
	t.Run("delete", func(t *testing.T) {
		res, _ := s.form("/teams", "/teams/"+id+"/delete", url.Values{})
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/teams" {
			t.Fatalf("status %d to %s", res.StatusCode, res.Header.Get("Location"))
		}
		if res, _ := s.get("/teams/" + id); res.StatusCode != http.StatusNotFound {
			t.Fatalf("deleted team: status %d", res.StatusCode)
		}
		if list, _ := s.db.Teams(ctx); len(list) != 1 {
			t.Fatalf("%d teams", len(list))
		}
	})
	t.Run("import the export: the round trip gives the same document", func(t *testing.T) {
		res, _ := s.form("/teams", "/teams/import", url.Values{"team": {string(exported)}})
		back := teamIDFrom(t, res)
		if again := s.exportTeam(back); !bytes.Equal(again, exported) {
			t.Fatalf("export → import → export:\n%s\nwant:\n%s", again, exported)
		}
	})
	t.Run("import an uploaded file", func(t *testing.T) {
		_, doc := s.get("/teams")
		token := doc.Find(`[data-testid="import-form"] input[name="_csrf"]`).AttrOr("value", "")
		res := s.postTeamMultipart("/teams/import", map[string]string{"_csrf": token}, "team_file", "writers.json", exported)
		teamIDFrom(t, res)
	})
	t.Run("a bad import writes nothing and says why", func(t *testing.T) {
		before, _ := s.db.Teams(ctx)
		for name, c := range map[string]struct{ doc, want string }{
			"a spec error":   {`{"name": "x", "prompt": "", "subagents": [{"name": "a", "description": "d", "mode": "shared"}]}`, "SubAgent 'a' has invalid mode 'shared'; expected 'isolated' or 'fork'"},
			"not JSON":       {`{"name": "x", `, "JSON"},
			"an unknown key": {`{"name": "x", "prompt": "", "agents": []}`, "agents"},
			"nothing":        {"  ", "nothing to import"},
		} {
			res, doc := s.form("/teams", "/teams/import", url.Values{"team": {c.doc}})
			if res.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: status %d", name, res.StatusCode)
				continue
			}
			if got := doc.Find(`[data-testid="import-form"] [data-testid="errors"]`).Text(); !strings.Contains(got, c.want) {
				t.Errorf("%s: errors %q, want %q", name, got, c.want)
			}
			if got := doc.Find(`textarea[name="team"]`).Text(); strings.TrimSpace(c.doc) != "" && got != c.doc {
				t.Errorf("%s: textarea = %q", name, got)
			}
		}
		if after, _ := s.db.Teams(ctx); len(after) != len(before) {
			t.Fatalf("%d teams → %d", len(before), len(after))
		}
	})
}

func TestTeamRun(t *testing.T) {
	s := teamStudio(t)
	t.Run("a team with a script runs to its end", func(t *testing.T) {
		id := s.createTeam("name", "runner", "prompt", "Say done.",
			"subagents[0].name", "helper", "subagents[0].description", "Helps.", "subagents[0].mode", "isolated",
			"script", `{"main": [{"tool_calls": [{"name": "task", "args": {"description": "help", "subagent_type": "helper"}}]}, {"content": "Done."}], "helper": [[{"content": "helped"}]]}`)
		res, _ := s.form("/teams/"+id, "/teams/"+id+"/run", url.Values{})
		sid := sessionID(t, res)
		s.waitDone(sid)
		sess, err := s.db.Session(context.Background(), sid)
		if err != nil {
			t.Fatal(err)
		}
		if sess.Status != delegation.StatusDone || sess.Name != "runner" || sess.Agents != 2 {
			t.Fatalf("session %s: status %s, name %s, %d agents (%s)", sid, sess.Status, sess.Name, sess.Agents, sess.Error)
		}
	})
	t.Run("a team with no script and no prompt says so on its page", func(t *testing.T) {
		id := s.createTeam("name", "idle")
		before, _ := s.db.Sessions(context.Background(), 0)
		res, doc := s.form("/teams/"+id, "/teams/"+id+"/run", url.Values{})
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", res.StatusCode)
		}
		if got := teamFieldError(doc, "script"); !strings.Contains(got, "the scripted model needs a script") {
			t.Errorf("at script: %q", got)
		}
		if got := teamFieldError(doc, "prompt"); !strings.Contains(got, "needs a prompt") {
			t.Errorf("at prompt: %q", got)
		}
		if !strings.Contains(doc.Find(`[data-testid="notice"]`).Text(), "cannot run") {
			t.Errorf("notice = %q", doc.Find(`[data-testid="notice"]`).Text())
		}
		if got := teamFormValues(doc.Find(`[data-testid="team-form"]`)).Get("name"); got != "idle" {
			t.Errorf("the page shows team %q", got)
		}
		if after, _ := s.db.Sessions(context.Background(), 0); len(after) != len(before) {
			t.Fatal("a team that cannot run started a session")
		}
	})
}

// flippableLesson finds a lesson (order-number when there is one) whose
// scenario has an isolated subagent that may become a fork.
func flippableLesson(t *testing.T) (name string, sub int, f scenario.File) {
	t.Helper()
	all := lessons.All()
	sort.SliceStable(all, func(i, j int) bool { return all[i].Name == "order-number" && all[j].Name != "order-number" })
	for _, l := range all {
		var f scenario.File
		if json.Unmarshal(l.Scenario, &f) != nil || len(f.Script) == 0 {
			continue
		}
		for i, s := range f.Subagents {
			if (s.Mode == "" || s.Mode == "isolated") && len(s.Skills) == 0 && s.Name != delegation.GeneralPurposeName {
				return l.Name, i, f
			}
		}
	}
	t.Skip("no lesson has an isolated subagent to flip")
	return "", 0, f
}

// TestCloneLessonFlipToFork is the experiment the editor exists for: take a
// lesson, flip its isolated subagent to fork, run it again, compare.
func TestCloneLessonFlipToFork(t *testing.T) {
	s := teamStudio(t)
	lesson, i, lf := flippableLesson(t)
	sub := lf.Subagents[i]
	t.Logf("lesson %s: flipping %s", lesson, sub.Name)
	res, _ := s.form("/teams", "/clone-team", url.Values{"lesson": {lesson}})
	id := teamIDFrom(t, res)
	v := s.openTeamForm("/teams/" + id)
	if v.Get(templates.SubKey(i, "name")) != sub.Name || v.Get(templates.SubKey(i, "mode")) != "isolated" || v.Get("prompt") != lf.Prompt || v.Get("script") == "" {
		t.Fatalf("cloned form: %v", v)
	}
	if v.Get("name") != lf.Name+"-team" {
		t.Fatalf("the clone is named %q, want %q: its sessions must be told from the lesson's", v.Get("name"), lf.Name+"-team")
	}
	res, _, _ = s.postTeam("/teams/"+id, teamValues(v, templates.SubKey(i, "mode"), "fork", "action", "save"))
	if got := teamIDFrom(t, res); got != id {
		t.Fatalf("saved to %s", got)
	}
	_, desc, _, _ := s.teamPreviewOf(s.openTeamForm("/teams/" + id))
	if line := "- " + sub.Name + ": " + sub.Description + delegation.ForkSuffix; !slices.Contains(descLines(desc), line) {
		t.Fatalf("no %q in:\n%s", line, desc)
	}

	res, _ = s.form("/teams/"+id, "/teams/"+id+"/run", url.Values{})
	sid := sessionID(t, res)
	s.waitDone(sid)
	tr, err := s.db.Trace(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Session.Status != delegation.StatusDone {
		t.Fatalf("status %s", tr.Session.Status)
	}
	forks := 0
	for _, a := range tr.Agents {
		if a.Name == sub.Name {
			if a.Mode == nil || *a.Mode != "fork" {
				t.Fatalf("%s ran as %v, want fork", a.Name, a.Mode)
			}
			forks++
		}
	}
	if forks == 0 {
		t.Fatalf("%s never ran", sub.Name)
	}
	_, page := s.get("/teams/" + id)
	if page.Find(`[data-testid="team-run"][data-session="`+sid+`"]`).Length() != 1 {
		t.Fatal("the team page does not list its run")
	}
	if page.Find(`[data-testid="source-not-run"]`).Length() != 1 {
		t.Fatal("a team whose lesson never ran does not say how to compare with it")
	}
	res, _ = s.form("/lessons/"+lesson, "/lessons/"+lesson+"/run", url.Values{})
	s.lessonRunIDs(res)
	_, page = s.get("/teams/" + id)
	if href, ok := page.Find(`[data-testid="compare-source"]`).Attr("href"); !ok || !strings.Contains(href, "b="+sid) {
		t.Fatalf("the team's run offers no comparison with its lesson's run (%q)", href)
	}
	if lesson == "order-number" {
		// The fork sees the parent's conversation, where the order number is.
		for _, m := range tr.Messages {
			if m.Kind == string(delegation.KindReceipt) && !strings.Contains(m.Content, "A-7731") {
				t.Errorf("receipt %q: the fork should see the order number", m.Content)
			}
		}
	}

	t.Run("a session clones into a team", func(t *testing.T) {
		res, _ := s.form("/teams", "/clone-team", url.Values{"session": {sid}})
		cid := teamIDFrom(t, res)
		if got := s.openTeamForm("/teams/" + cid); got.Get(templates.SubKey(i, "mode")) != "fork" || got.Get("name") != lf.Name+"-team-2" {
			t.Fatalf("clone of the session: %v", got)
		}
	})
	t.Run("an unknown lesson or session is a 404", func(t *testing.T) {
		for _, v := range []url.Values{{"lesson": {"nope"}}, {"session": {"nope"}}} {
			if res, _ := s.form("/teams", "/clone-team", v); res.StatusCode != http.StatusNotFound {
				t.Errorf("%v: status %d", v, res.StatusCode)
			}
		}
	})
}

var teamInlineScript = regexp.MustCompile(`<script(?:\s[^>]*)?>`)

// TestTeamPagesKeepTheCSP renders every team component and checks none
// needs an inline script or style.
func TestTeamPagesKeepTheCSP(t *testing.T) {
	s := teamStudio(t)
	id := s.createTeam("name", "csp", "subagents[0].name", "x", "subagents[0].description", "d", "subagents[0].mode", "isolated")
	for _, path := range []string{"/teams", "/teams/new", "/teams/" + id} {
		res, err := s.c.Get(s.ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", path, res.StatusCode)
		}
		page := string(body)
		if strings.Contains(page, " style=") || strings.Contains(page, "<style") {
			t.Errorf("%s has an inline style", path)
		}
		for _, tag := range teamInlineScript.FindAllString(page, -1) {
			if !strings.Contains(tag, `src="/static/`) {
				t.Errorf("%s has an inline script: %s", path, tag)
			}
		}
		if !strings.Contains(page, `href="/teams`) {
			t.Errorf("%s does not link to the teams", path)
		}
	}
}

func TestTeamErrorsFindTheirFields(t *testing.T) {
	form := templates.TeamForm{Subagents: make([]templates.SubagentForm, 2)}
	form.SetErrors([]templates.FieldError{
		{Field: "subagents[1].tools[2]", Message: "a"},
		{Field: "agent.tools[0]", Message: "b"},
		{Field: "script.main[0].tool_calls[1]", Message: "c"},
		{Field: `files["/x[1]"]`, Message: "d"},
		{Field: "agent.summarization.max_tokens", Message: "e"},
		{Field: "subagents", Message: "f"},
		{Field: "", Message: "g"},
		{Field: "nonsense", Message: "h"},
	})
	for key, want := range map[string]string{
		"subagents[1].tools": "a", "agent.tools": "b", "script": "c", "files": "d",
		"agent.summarization.max_tokens": "e", "subagents": "f",
	} {
		if got := form.Errs(key); !slices.Equal(got, []string{want}) {
			t.Errorf("at %s: %v, want [%s]", key, got, want)
		}
	}
	if len(form.TopErrors) != 2 || form.TopErrors[0].Message != "g" || form.TopErrors[1].Message != "h" {
		t.Errorf("top = %v, want g and h", form.TopErrors)
	}
	if got := form.ErrorCount(); got != 8 {
		t.Errorf("ErrorCount = %d, want 8", got)
	}
}

func TestSubagentEndpointRoundTrip(t *testing.T) {
	s := teamStudio(t)
	doc := `{"name": "split", "prompt": "go", "model": {"provider": "openai", "model": "big"},
		"subagents": [{"name": "local", "description": "runs nearby", "model": "small",
		  "base_url": "http://127.0.0.1:8080/v1", "api_key_env": "LOCAL_API_KEY"}]}`
	res, _ := s.form("/teams", "/teams/import", url.Values{"team": {doc}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("import: %d", res.StatusCode)
	}
	loc := res.Header.Get("Location")
	_, page := s.get(loc)
	if got, _ := page.Find(`input[name="subagents[0].base_url"]`).Attr("value"); got != "http://127.0.0.1:8080/v1" {
		t.Fatalf("the form shows base_url %q", got)
	}
	r, body := s.api("GET", loc+"/export", "", nil)
	if r.StatusCode != 200 || !strings.Contains(string(body), `"base_url": "http://127.0.0.1:8080/v1"`) || !strings.Contains(string(body), `"api_key_env": "LOCAL_API_KEY"`) {
		t.Fatalf("export %d: %s", r.StatusCode, body)
	}
}
