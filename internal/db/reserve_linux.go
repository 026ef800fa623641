//go:build linux

package db

import (
	"path/filepath"
	"syscall"
)

// errQuota is a write past the user's disk quota: as full, to that user.
var errQuota error = syscall.EDQUOT

// freeSpace is the room left to unprivileged writers on the disk of path.
func freeSpace(path string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
