package lessons

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	// figure is a number in a text: digits (with thousands commas), or a
	// word from two to twenty, or once and twice.
	figure = regexp.MustCompile(`(?i)\b(\d[\d,]*(?:\.\d+)?|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|once|twice)\b`)
	// reference is a section or an article named in a text, not a figure.
	reference = regexp.MustCompile(`(?i)(§\s*\d+(?:[–-]§?\d+)?|article\s+\d|articles\s+\d(?:\s*(?:,|and)\s*\d)*|issue\s+\d+|delegation\.md\s*§\d+)`)
	words     = map[string]int{"once": 1, "twice": 2, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
		"nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
		"seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20}
)

// figureValue reads a figure as a number, as text ("1,419" → "1419").
func figureValue(f string) string {
	if n, ok := words[strings.ToLower(f)]; ok {
		return strconv.Itoa(n)
	}
	return strings.ReplaceAll(f, ",", "")
}

// figures lists the figures of a text, references left out.
func figures(text string) []string {
	text = reference.ReplaceAllString(text, " ")
	var out []string
	for _, m := range figure.FindAllString(text, -1) {
		out = append(out, figureValue(m))
	}
	return out
}

// cellFigures are the numbers of a cell, as text.
func cellFigures(cell string) []string { return figures(cell) }

// inputs are the figures a scenario's own inputs hold (its prompt, files,
// team and script): an order number or a door code is an input, not a claim.
func inputs(t *testing.T, doc []byte) map[string]bool {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	delete(v, "description")
	delete(v, "title")
	b, _ := json.Marshal(v)
	out := map[string]bool{}
	for _, f := range figures(string(b)) {
		out[f] = true
	}
	return out
}

// checkTexts checks a lesson's texts against its computed table: every
// claim holds, and every other figure is accounted for.
func checkTexts(t *testing.T, l Lesson, tab Table) {
	t.Helper()
	texts := map[string]string{"the lesson's description": l.Description, "the table's note": tab.Note}
	for _, v := range l.Variants {
		if v.Recorded != nil {
			continue // a recording: no scenario, no text of ours
		}
		var f struct {
			Description string `json:"description"`
		}
		_ = json.Unmarshal(v.Scenario, &f)
		texts["scenario "+v.Name+"'s description"] = f.Description
	}
	allowed := map[string]bool{}
	for _, v := range l.Variants {
		if v.Recorded != nil {
			continue
		}
		for f := range inputs(t, v.Scenario) {
			allowed[f] = true
		}
	}
	if a := tab.Article; a != nil {
		for _, r := range a.Rows {
			for _, c := range r {
				for _, f := range cellFigures(c) {
					allowed[f] = true
				}
			}
		}
	}
	// What the table shows counts for the note, which is computed from it.
	shown := map[string]bool{}
	for _, r := range tab.Rows {
		for _, c := range r {
			for _, f := range cellFigures(c) {
				shown[f] = true
			}
		}
	}
	for _, c := range tab.Checks {
		for _, f := range cellFigures(c.Detail) {
			shown[f] = true
		}
	}

	claimed := map[string][]string{} // text name → figures its claims cover
	for _, c := range l.claims {
		var where []string
		for name, text := range texts {
			for range strings.Count(text, c.phrase) {
				where = append(where, name)
			}
		}
		if len(where) == 0 {
			t.Errorf("claim %q is in none of the lesson's texts", c.phrase)
			continue
		}
		fs := figures(c.phrase)
		if len(fs) != 1 {
			t.Errorf("claim %q must hold exactly one figure, it holds %q", c.phrase, fs)
			continue
		}
		cell, ok := tableCell(tab, c.row, c.col)
		if !ok {
			t.Errorf("claim %q: the table has no cell (%q, %q)", c.phrase, c.row, c.col)
			continue
		}
		if cf := cellFigures(cell); len(cf) == 0 || cf[0] != fs[0] {
			t.Errorf("%s says %q, but the table's cell (%q, %q) is %q", where[0], c.phrase, c.row, c.col, cell)
		}
		for _, w := range where {
			claimed[w] = append(claimed[w], fs[0])
		}
	}
	for name, text := range texts {
		for _, f := range figures(text) {
			if i := slices.Index(claimed[name], f); i >= 0 {
				claimed[name] = slices.Delete(claimed[name], i, i+1)
				continue
			}
			if allowed[f] || (name == "the table's note" && shown[f]) {
				continue
			}
			t.Errorf("%s states %s, which is neither a claim checked against the table, an input of the scenario, nor one of the article's figures:\n%s", name, f, text)
		}
	}
}

// tableCell is the cell of the row whose first cell is row, in column col.
func tableCell(tab Table, row, col string) (string, bool) {
	ci := slices.Index(tab.Columns, col)
	if ci < 0 {
		return "", false
	}
	for _, r := range tab.Rows {
		if r[0] == row {
			return r[ci], true
		}
	}
	return "", false
}
