package delegation

import (
	"fmt"
	"strings"
)

// FieldError is one problem with an input, tied to the field it is about,
// written for the person who has to fix it.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// FieldErrors is every problem found in one input. Validation reports them
// all at once rather than stopping at the first.
type FieldErrors []FieldError

func (es FieldErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Add appends a problem with field.
func (es *FieldErrors) Add(field, format string, args ...any) {
	*es = append(*es, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Err returns es as an error, or nil when there is no problem.
func (es FieldErrors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}
