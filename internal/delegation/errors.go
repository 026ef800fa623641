package delegation

import (
	"errors"
	"fmt"
	"strings"
)

// FieldError is one problem with an input, tied to the field it is about,
// written for the person who has to fix it. Code, when set, names the kind
// of problem for a program that treats it apart (the message is for a
// person, never matched).
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
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

// Error codes: what kind of failure an Error is, for mapping to an HTTP
// status or an exit code.
const (
	ENOTFOUND = "not_found"
	EINVALID  = "invalid"
	ECONFLICT = "conflict"
	ETOOLARGE = "too_large"
	// EUNAVAILABLE is a resource we depend on failing for now: the database
	// locked by another process, damaged or read-only.
	EUNAVAILABLE = "unavailable"
	// EFULL is the disk that holds the store being full: nothing more can be
	// written until some space is freed.
	EFULL = "full"
	// EREADONLY is a change asked of a studio serving its database
	// read-only (serve --read-only, or a file it may not write).
	EREADONLY = "read_only"
	// ESTOPPING is a start asked of a studio that is stopping: for now,
	// not for good (its next run takes it).
	ESTOPPING = "stopping"
	EINTERNAL = "internal"
)

// Error is a failure with a code and a message written for a person. Any
// other error is an internal one: logged, and shown as "Internal error".
type Error struct {
	Code    string
	Message string
	// Fields, for EINVALID, are the problems one by one.
	Fields FieldErrors
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with a code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode is err's code: its *Error's, EINVALID for FieldErrors, else
// EINTERNAL.
func ErrorCode(err error) string {
	var e *Error
	var fe FieldErrors
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	case errors.As(err, &fe):
		return EINVALID
	}
	return EINTERNAL
}

// MaxFieldErrors is the most problems one input gets reported, as the
// schema reports them: past it a person fixes what is listed and checks
// again, and an input made of errors costs no more than a short one.
const MaxFieldErrors = 50

// moreErrorsPrefix starts the entry that counts the problems not listed.
const moreErrorsPrefix = "and "

// MoreErrors is the last entry of a list cut at MaxFieldErrors: it counts
// the n problems left out.
func MoreErrors(n int) FieldError {
	return FieldError{Message: fmt.Sprintf("%s%d more problems not listed: fix these and check again", moreErrorsPrefix, n)}
}

// Capped returns es cut to MaxFieldErrors, the rest counted in one last
// entry.
func (es FieldErrors) Capped() FieldErrors {
	n := CountErrors(es)
	if n <= MaxFieldErrors {
		return es
	}
	listed := es
	if n != len(es) {
		listed = es[:len(es)-1] // without its count
	}
	listed = listed[:min(len(listed), MaxFieldErrors)]
	return append(append(FieldErrors(nil), listed...), MoreErrors(n-len(listed)))
}

// CountErrors is how many problems es holds, those its last entry counts
// included.
func CountErrors(es FieldErrors) int {
	if len(es) == 0 {
		return 0
	}
	last := es[len(es)-1]
	var n int
	if last.Field == "" && strings.HasPrefix(last.Message, moreErrorsPrefix) {
		if _, err := fmt.Sscanf(last.Message[len(moreErrorsPrefix):], "%d more problems", &n); err == nil {
			return len(es) - 1 + n
		}
	}
	return len(es)
}
