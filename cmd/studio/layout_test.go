package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadmeLayoutTable: the README's table of packages says, for each of
// ours, what of ours it imports. It is checked against `go list`, so it
// stays true as packages move: every package has a row, and each row's
// "depends on" is exactly the packages of ours its paths import (by the
// names the table uses: the path after internal/, templates and static for
// web/, schema).
func TestReadmeLayoutTable(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/delegationstudio/studio/"
	imports := map[string][]string{} // a package's path in the tree: the names of ours it imports
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		path := strings.TrimPrefix(f[0], module)
		imports[path] = []string{}
		for _, imp := range f[1:] {
			if p, ok := strings.CutPrefix(imp, module); ok {
				imports[path] = append(imports[path], layoutName(p))
			}
		}
	}

	rows := 0
	seen := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		var paths []string
		for _, p := range strings.Split(cells[1], ",") {
			p = strings.Trim(strings.TrimSpace(p), "`")
			paths = append(paths, strings.TrimSuffix(p, "/"))
		}
		if _, ok := imports[paths[0]]; !ok {
			continue // another table of the README
		}
		rows++
		want := map[string]bool{}
		for _, p := range paths {
			deps, ok := imports[p]
			if !ok {
				t.Errorf("README: %s is in the layout table but is not a package", p)
			}
			seen[p] = true
			for _, d := range deps {
				want[d] = true
			}
		}
		for _, p := range paths { // a row's own packages are not its dependencies
			delete(want, layoutName(p))
		}
		var said []string
		if c := strings.TrimSpace(cells[3]); c != "—" && c != "nothing of ours" {
			for _, d := range strings.Split(c, ",") {
				said = append(said, strings.TrimSpace(d))
			}
		}
		var got []string
		for d := range want {
			got = append(got, d)
		}
		slices.Sort(got)
		slices.Sort(said)
		if !slices.Equal(got, said) {
			t.Errorf("README: %s depends on %q, says %q; write: %s", strings.Join(paths, ", "), got, said, orNone(got))
		}
	}
	if rows == 0 {
		t.Fatal("README: no layout table found (| `path` | holds | depends on |)")
	}
	for p := range imports {
		if !seen[p] {
			t.Errorf("README: package %s has no row in the layout table", p)
		}
	}
}

// layoutName is a package as the layout table names it.
func layoutName(path string) string {
	if p, ok := strings.CutPrefix(path, "internal/"); ok {
		return p
	}
	if p, ok := strings.CutPrefix(path, "web/"); ok {
		return p
	}
	return path
}

func orNone(deps []string) string {
	if len(deps) == 0 {
		return "—"
	}
	return strings.Join(deps, ", ")
}
