package lessons

import (
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var lostUpdate = lessonDef{
	name:    "lost-update",
	title:   "Parallel siblings and their files: the lost update",
	article: "Ours: the studio's delegation rules, §6 “What crosses back”, where the studio does better than deepagents' file merge",
	description: "Ours, delegation.md §6 (Better): two siblings run at once, one edits /config.md and deletes /old.md, " +
		"the other only writes /report.md. Compare the final files: merging each child's whole file map (deepagents' " +
		"'snapshot', what compat 'deepagents' does) lets the untouched sibling's stale copy overwrite the edit and revive the deleted file; merging " +
		"each child's changes ('delta') loses nothing.",
	variants: []variantDef{
		{name: "snapshot", label: "deepagents (compat: deepagents, whole file maps merged)"},
		{name: "delta", label: "ours (files_merge: delta)"},
	},
	table: lostUpdateTable,
	// Under snapshot the untouched sibling's stale copies overwrite the
	// editor's edit and deletion, in one step of main: the notes say so.
	notes: map[string][]string{"snapshot": {"overwritten"}},
}

func fileCell(files map[string]string, path string) string {
	c, ok := files[path]
	if !ok {
		return "(absent)"
	}
	return quote(strings.TrimRight(c, "\n"))
}

func lostUpdateTable(r runs) (Table, error) {
	snap, delta := r.view("snapshot"), r.view("delta")
	sc, err := scenarioOf(snap.t)
	if err != nil {
		return Table{}, err
	}
	start := sc.File.Files
	// What each child did, from its own files.changed events.
	did := map[string][]string{}
	for _, name := range []string{"editor", "writer"} {
		a, err := snap.agent(name)
		if err != nil {
			return Table{}, err
		}
		for _, ev := range events[delegation.FilesChanged](snap, delegation.EventFilesChanged) {
			if ev.AgentID != a.ID {
				continue
			}
			for _, ch := range ev.Data.Changes {
				verb := "edited"
				switch {
				case ch.Deleted:
					verb = "deleted"
				case start[ch.Path] == "":
					verb = "wrote"
				}
				did[ch.Path] = append(did[ch.Path], name+" "+verb)
			}
		}
	}
	tab := Table{
		Title:   "The parent's files after two parallel children",
		Columns: []string{"file", "at the start", "the children", "snapshot merge", "delta merge", "lost under snapshot?"},
	}
	paths := []string{"/config.md", "/old.md", "/report.md"}
	lost := map[string]bool{}
	for _, p := range paths {
		s, d := fileCell(snap.t.Files, p), fileCell(delta.t.Files, p)
		lost[p] = s != d
		what := "untouched by both"
		if len(did[p]) > 0 {
			what = strings.Join(did[p], ", ") + "; the other left it"
		}
		l := "no"
		switch {
		case lost[p] && strings.HasSuffix(what, "deleted; the other left it"):
			l = "yes: the deleted file came back"
		case lost[p] && strings.HasSuffix(what, "edited; the other left it"):
			l = "yes: the edit was undone"
		case lost[p]:
			l = "yes"
		}
		tab.Rows = append(tab.Rows, []string{p, fileCell(start, p), what, s, d, l})
	}
	tab.Note = "deepagents' behaviour, reproduced by compat 'deepagents' (which merges whole file maps, like files_merge 'snapshot'); the articles do not measure it."
	for _, row := range tab.Rows {
		tab.Versus = append(tab.Versus, Versus{What: row[0] + " after both children", Article: row[3], Ours: row[4],
			Why: "deepagents copies each child's whole file map back, per path, in call order; we apply each child's changes"})
	}
	tab.Checks = append(tab.Checks,
		check("under snapshot, the editor's edit of /config.md is lost to the writer's stale copy",
			snap.t.Files["/config.md"] == start["/config.md"] && strings.Join(did["/config.md"], ",") == "editor edited",
			"final %s; at the start %s", fileCell(snap.t.Files, "/config.md"), fileCell(start, "/config.md")),
		check("under snapshot, the file the editor deleted survives", fileCell(snap.t.Files, "/old.md") != "(absent)",
			"/old.md: %s", fileCell(snap.t.Files, "/old.md")),
		check("under delta, the edit stays and the deleted file is gone",
			delta.t.Files["/config.md"] == "retries = 3\n" && fileCell(delta.t.Files, "/old.md") == "(absent)",
			"/config.md %s; /old.md %s", fileCell(delta.t.Files, "/config.md"), fileCell(delta.t.Files, "/old.md")),
		check("the writer's new file arrives either way", snap.t.Files["/report.md"] != "" && snap.t.Files["/report.md"] == delta.t.Files["/report.md"],
			"/report.md: %s", fileCell(delta.t.Files, "/report.md")),
		check("the children did the same in both runs: only the merge differs", sameScripts(snap, delta),
			"the two scenarios differ only in agent.files_merge"),
	)
	return tab, nil
}

// sameScripts reports whether two runs played the same script with the same
// team, but for the merge setting.
func sameScripts(a, b *view) bool {
	sa, err1 := scenarioOf(a.t)
	sb, err2 := scenarioOf(b.t)
	if err1 != nil || err2 != nil {
		return false
	}
	return string(sa.File.Script) == string(sb.File.Script) && sa.File.Prompt == sb.File.Prompt &&
		compactJSON(sa.File.Subagents) == compactJSON(sb.File.Subagents) && compactJSON(sa.File.Files) == compactJSON(sb.File.Files) &&
		sa.Team.Main.FilesMerge == delegation.MergeSnapshot && sb.Team.Main.FilesMerge == delegation.MergeDelta
}
