package delegation

// What crosses back from a child to its parent (delegation.md §6):
// messages only as the receipt; files yes; todos, the structured response
// and the fork marker no.

// mergeFiles brings a finished child's files back into its parent and
// reports whether anything came back. Under MergeDelta the child's own
// writes and deletes are applied, so a sibling that never touched a file
// cannot overwrite another's edit of it. Under MergeSnapshot the child's
// whole file map is copied over the parent's, per path, as deepagents does:
// a sibling's stale copy overwrites an edit, and deleted files survive.
func mergeFiles(parent, child *workspace, merge Merge) bool {
	if merge == MergeSnapshot {
		for _, p := range child.sortedPaths() {
			if old, ok := parent.files[p]; !ok || old != child.files[p] {
				parent.write(p, child.files[p])
			}
		}
		return len(child.files) > 0
	}
	parent.applyChanges(child.changes)
	return len(child.changes) > 0
}

// returnedState names what came back from a child and what was held back,
// for delegation.finished.
func returnedState(child *agent, filesChanged bool) (returned, heldBack []string) {
	returned = []string{"receipt"}
	if filesChanged {
		returned = append(returned, "files")
	}
	heldBack = []string{"messages"}
	if len(child.ws.todos) > 0 {
		heldBack = append(heldBack, "todos")
	}
	if child.structuredAnswer != "" {
		heldBack = append(heldBack, "structured_response")
	}
	return returned, heldBack
}
