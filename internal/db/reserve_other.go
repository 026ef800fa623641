//go:build !linux

package db

import "errors"

// errQuota matches nothing where the quota error is not known here.
var errQuota = errors.New("disk quota exceeded")

// freeSpace is not known here: the reserve alone says whether the disk is
// full.
func freeSpace(string) (uint64, bool) { return 0, false }
