package delegation

import (
	"context"
	"errors"
)

// Why a session was stopped from outside: the codes session.finished and
// agent.finished carry as stopped_by (formats.md §3). The edge (pages, the
// command line) words them from the locales.
const (
	StopUser     = "user"     // someone stopped it in the studio (its Stop, the API)
	StopShutdown = "shutdown" // the studio running it was stopping
	StopSignal   = "signal"   // its process got Ctrl-C or SIGTERM (studio run)
	StopLapsed   = "lapsed"   // its process stopped renewing its lease; another process ended it
	StopOther    = "other"    // its context was cancelled without saying why
)

// Stopped is a cancellation cause (context.WithCancelCause) that says why
// a session is stopped: By is a Stop* code.
type Stopped struct{ By string }

func (s Stopped) Error() string { return "the session was stopped (" + s.By + ")" }

// StopReason is why ctx was stopped from outside, as a Stop* code: its
// cause's when that is a Stopped, StopOther when it was cancelled plainly,
// "" when it was not stopped (it runs, it ran out of time, or a cause of
// the engine's own cancelled it, as a sibling's failure does).
func StopReason(ctx context.Context) string {
	if ctx.Err() == nil {
		return ""
	}
	cause := context.Cause(ctx)
	var s Stopped
	switch {
	case errors.As(cause, &s):
		return s.By
	case errors.Is(cause, context.Canceled):
		return StopOther
	}
	return ""
}

// stopCause is ctx's cause when it was stopped from outside (StopReason),
// else nil.
func stopCause(ctx context.Context) error {
	if StopReason(ctx) == "" {
		return nil
	}
	return context.Cause(ctx)
}
