package present

import (
	"fmt"
	"strings"
)

// attrIs is the CSS selector [name="value"], the value written as a CSS
// string (CSSOM's "serialize a string"): ids come from the engine, but an
// imported trace or a model's tool call could hold quotes or brackets that
// would otherwise change what a live patch selects.
func attrIs(name, value string) string {
	var b strings.Builder
	b.WriteString("[" + name + `="`)
	for _, r := range value {
		switch {
		case r == 0:
			b.WriteRune('\uFFFD')
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\%x `, r)
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(`"]`)
	return b.String()
}
