package db

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
)

type codedError int

func (e codedError) Error() string { return fmt.Sprintf("sqlite error %d", int(e)) }
func (e codedError) Code() int     { return int(e) }

func TestDescribe(t *testing.T) {
	for code, want := range map[int]string{
		11:        "is damaged",
		26:        "is damaged or is not a studio database",
		8:         "cannot be written",
		8 | 3<<8:  "cannot be written", // SQLITE_READONLY_ROLLBACK: the primary code decides
		14:        "cannot be opened",
		10 | 4<<8: "failed on its disk",
	} {
		err := Describe("/x/studio.db", fmt.Errorf("list sessions: %w", codedError(code)))
		if delegation.ErrorCode(err) != delegation.EUNAVAILABLE || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "/x/studio.db") {
			t.Errorf("code %d: %v", code, err)
		}
	}
	plain := errors.New("something else")
	if Describe("/x", plain) != plain || Describe("/x", fmt.Errorf("w: %w", codedError(19))).Error() != "w: sqlite error 19" {
		t.Error("other errors must pass as they are")
	}
}
