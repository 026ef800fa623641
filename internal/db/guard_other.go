//go:build !unix

package db

import "os"

// flockExclusive is a no-op where flock does not exist: there, nothing
// stops a second server on one file but its write transactions.
func flockExclusive(*os.File) error { return nil }

// flockShared is a no-op where flock does not exist: there, no server is
// seen holding a file.
func flockShared(*os.File) error { return nil }
