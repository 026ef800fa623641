package server

import "github.com/delegationstudio/studio/internal/db/storetest"

// A store that passes the shared suite serves the server: the suite tests
// all the server uses.
var _ Store = storetest.Store(nil)
