// Package lessons holds the built-in lessons: scenario files that reproduce
// the experiments of the articles the studio comes from, each with a short
// explanation of what to look at.
package lessons

import (
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

//go:embed scenarios/*.json
var files embed.FS

// Lesson is a built-in scenario and what it teaches.
type Lesson struct {
	Name        string
	Title       string
	Description string
	Scenario    []byte
}

// All returns every lesson, in name order.
func All() []Lesson {
	entries, err := files.ReadDir("scenarios")
	if err != nil {
		panic(err) // the directory is embedded: it exists
	}
	var out []Lesson
	for _, e := range entries {
		doc, err := files.ReadFile(path.Join("scenarios", e.Name()))
		if err != nil {
			panic(err)
		}
		var head struct{ Name, Title, Description string }
		if err := json.Unmarshal(doc, &head); err != nil {
			panic(fmt.Sprintf("lesson %s: %v", e.Name(), err)) // caught by the package's tests
		}
		out = append(out, Lesson{Name: head.Name, Title: head.Title, Description: head.Description, Scenario: doc})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns the named lesson.
func Get(name string) (Lesson, error) {
	var names []string
	for _, l := range All() {
		if l.Name == name {
			return l, nil
		}
		names = append(names, l.Name)
	}
	return Lesson{}, fmt.Errorf("no lesson %q; the lessons are %s", name, strings.Join(names, ", "))
}
