package view

import (
	"slices"
	"strings"
)

// FilesPage is how many of main's files a session page lists, in path
// order; the rest are a link away.
var FilesPage = 100

// Files is the main agent's file index: its paths, in order, without their
// contents (the store has those). A page lists the first FilesPage.
type Files struct {
	paths []string
	// count stands in for paths in a state restored from a snapshot, which
	// no event will change again, and for those past the first page in a
	// clone.
	count int
}

// Count is the number of files.
func (f *Files) Count() int { return max(len(f.paths), f.count) }

// Page returns the paths of the first page, in order; none in a state
// restored from a snapshot.
func (f *Files) Page() []string {
	return append([]string{}, f.paths[:min(len(f.paths), FilesPage)]...)
}

func (f *Files) put(path string, ch *Changes) {
	ch.FilesTouched = union(ch.FilesTouched, path)
	i, found := slices.BinarySearchFunc(f.paths, path, strings.Compare)
	if !found {
		f.paths = slices.Insert(f.paths, i, path)
	}
}

func (f *Files) remove(path string, ch *Changes) {
	ch.FilesTouched = union(ch.FilesTouched, path)
	if i, found := slices.BinarySearchFunc(f.paths, path, strings.Compare); found {
		f.paths = slices.Delete(f.paths, i, i+1)
	}
}
