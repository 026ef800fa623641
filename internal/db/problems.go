package db

import (
	"errors"
	"fmt"

	"github.com/delegationstudio/studio/internal/delegation"
)

// SQLite's result codes for a file that cannot serve (primary codes).
const (
	sqlitePerm     = 3
	sqliteReadonly = 8
	sqliteIOErr    = 10
	sqliteCorrupt  = 11
	sqliteCantOpen = 14
	sqliteNotADB   = 26
)

// Describe turns an error SQLite reported about the file at path (damaged,
// read-only, unreadable) into an EUNAVAILABLE error that says so and what
// to do, for the person running the studio: a page shows it rather than
// "Internal error", and serve says it before it starts. Other errors,
// and those already described, are returned as they are.
func Describe(path string, err error) error {
	var de *delegation.Error
	var coded interface{ Code() int }
	if err == nil || errors.As(err, &de) || !errors.As(err, &coded) {
		return err
	}
	var msg string
	switch coded.Code() & 0xff {
	case sqliteCorrupt, sqliteNotADB:
		msg = fmt.Sprintf("the database %s is damaged or is not a studio database (%v): restore it from a backup, "+
			"or start the studio with another --db; sqlite3's .recover may save what it holds", path, err)
	case sqliteReadonly, sqlitePerm:
		msg = fmt.Sprintf("the database %s cannot be written (%v): make the file, and the folder it is in, writable "+
			"by the user running the studio", path, err)
	case sqliteCantOpen:
		msg = fmt.Sprintf("the database %s cannot be opened (%v): check that its folder exists and is writable", path, err)
	case sqliteIOErr:
		msg = fmt.Sprintf("reading or writing the database %s failed on its disk (%v): check the disk, then try again", path, err)
	default:
		return err
	}
	return &delegation.Error{Code: delegation.EUNAVAILABLE, Message: msg}
}

// Describe is the package's Describe for this store's file.
func (db *DB) Describe(err error) error { return Describe(db.path, err) }
