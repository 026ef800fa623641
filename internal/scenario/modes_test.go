package scenario

import (
	"reflect"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
)

// The both-modes comparison's rule: every subagent in the one mode, the
// general-purpose one declared so it changes too, a fork's own tools and
// skills dropped (it inherits its parent's), the mode in the name.
func TestInMode(t *testing.T) {
	const doc = `{"name":"x","title":"X","prompt":"p",
		"subagents":[{"name":"r","description":"d","mode":"isolated","tools":["read_file"],"skills":["/skills/a"]}],
		"script":{"main":[{"content":"done"}]}}`
	modes := func(sc *Scenario) map[string]delegation.Mode {
		m := map[string]delegation.Mode{}
		for _, s := range sc.Team.Subagents {
			m[s.Name] = s.Mode
		}
		return m
	}
	for _, mode := range []delegation.Mode{delegation.ModeIsolated, delegation.ModeFork} {
		sc, err := InMode([]byte(doc), mode)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		want := map[string]delegation.Mode{delegation.GeneralPurposeName: mode, "r": mode}
		if got := modes(sc); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: modes = %v, want %v", mode, got, want)
		}
		if sc.File.Subagents[0].Name != delegation.GeneralPurposeName {
			t.Fatalf("%s: the general-purpose subagent is not declared first: %+v", mode, sc.File.Subagents)
		}
		r := sc.File.Subagents[1]
		if fork := mode == delegation.ModeFork; fork != (r.Tools == nil && r.Skills == nil) {
			t.Fatalf("%s: tools %v, skills %v", mode, r.Tools, r.Skills)
		}
		if sc.File.Name != "x ("+string(mode)+")" || sc.File.Title != "X — all subagents "+string(mode) {
			t.Fatalf("%s: name %q, title %q", mode, sc.File.Name, sc.File.Title)
		}
	}
	t.Run("a declared general-purpose subagent is not added twice", func(t *testing.T) {
		sc, err := InMode([]byte(`{"name":"x","prompt":"p","subagents":[{"name":"general-purpose","description":"d"}],
			"script":{"main":[{"content":"done"}]}}`), delegation.ModeFork)
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.File.Subagents) != 1 || sc.File.Subagents[0].Mode != "fork" || sc.File.Title != "" {
			t.Fatalf("subagents %+v, title %q", sc.File.Subagents, sc.File.Title)
		}
	})
	t.Run("nor one the agent turned off", func(t *testing.T) {
		sc, err := InMode([]byte(`{"name":"x","prompt":"p","agent":{"general_purpose":false},
			"subagents":[{"name":"r","description":"d"}],"script":{"main":[{"content":"done"}]}}`), delegation.ModeFork)
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Team.Subagents) != 1 || sc.Team.Subagents[0].Name != "r" {
			t.Fatalf("subagents = %+v", sc.Team.Subagents)
		}
	})
	t.Run("a document that is not JSON is invalid", func(t *testing.T) {
		if _, err := InMode([]byte(`{`), delegation.ModeFork); delegation.ErrorCode(err) != delegation.EINVALID {
			t.Fatalf("err = %v", err)
		}
	})
}
