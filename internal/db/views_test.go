package db_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
)

// TestReadsNeverWaitOnEachOther: as many reads as the pool has connections,
// all open at once, each running a query no read has run before. A read
// that prepared its statement on the pool would wait for a connection the
// others hold, and they for it.
func TestReadsNeverWaitOnEachOther(t *testing.T) {
	d := openDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := d.CreateSession(ctx, &db.Session{ID: "s", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	const readers = 8 // the read pool's size
	var open, done sync.WaitGroup
	open.Add(readers)
	errs := make(chan error, readers)
	for i := range readers {
		done.Go(func() {
			r, err := d.ReadPage(ctx, "s")
			open.Done()
			if err != nil {
				errs <- err
				return
			}
			defer r.Close()
			open.Wait() // every connection is held now
			if _, err := r.Messages(ctx, "main", 0, 10+i); err != nil {
				errs <- err
			}
			if _, err := r.CallsTail(ctx, 5, 5); err != nil {
				errs <- err
			}
		})
	}
	done.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a read: %v", err)
	}
}
