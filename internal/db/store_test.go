package db_test

import (
	"testing"

	"github.com/delegationstudio/studio/internal/db/storetest"
)

// TestStore runs the suite every store passes against SQLite.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return openDB(t) })
}
