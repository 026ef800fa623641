package templates

import (
	"context"

	"github.com/a-h/templ"
)

// readOnlyKey is the context key of why the studio serves its database
// read-only.
type readOnlyKey struct{}

// WithReadOnly marks ctx as a request to a studio serving its database
// read-only, for reason (one of db's ReadOnly… codes): every page then says
// so in a banner, and the buttons that would write are disabled.
func WithReadOnly(ctx context.Context, reason string) context.Context {
	return context.WithValue(ctx, readOnlyKey{}, reason)
}

// readOnly is why the studio serves read-only, or "".
func readOnly(ctx context.Context) string {
	r, _ := ctx.Value(readOnlyKey{}).(string)
	return r
}

// writes are the attributes of a button that runs, imports or saves: none,
// or, on a read-only studio, disabled with the reason as its title.
func writes(ctx context.Context) templ.Attributes {
	if readOnly(ctx) == "" {
		return templ.Attributes{}
	}
	return templ.Attributes{"disabled": true, "title": T(ctx, "readonly.button")}
}

// writeTitle is the title of a button that writes: title, or, on a
// read-only studio, why it is disabled.
func writeTitle(ctx context.Context, title string) string {
	if readOnly(ctx) == "" {
		return title
	}
	return T(ctx, "readonly.button")
}
