package templates

import (
	"context"
	"net/url"
	"regexp"
	"sync"
	"time"

	"github.com/a-h/templ"

	"github.com/delegationstudio/studio/internal/i18n"
)

// The templates say nothing in a language of their own: every word comes
// from the catalogue of the language the request's context carries
// (internal/i18n), through these helpers; a test fails on a literal
// English text in a .templ file.

// T is a catalogue message, its template data as name, value pairs.
func T(ctx context.Context, id string, kv ...any) string { return i18n.From(ctx).T(id, kv...) }

// N is a plural catalogue message for n ("3 agents", "3 个 Agent").
func N(ctx context.Context, id string, n int, kv ...any) string {
	return i18n.From(ctx).N(id, n, kv...)
}

// Rich is a catalogue message that holds markup of its own; its data is
// escaped.
func Rich(ctx context.Context, id string, kv ...any) templ.Component {
	return templ.Raw(i18n.From(ctx).HTML(id, kv...))
}

// Data marks a message's value as a run's data (for Rich).
func Data(s string) i18n.Data { return i18n.Data(s) }

// L is a lesson's text (a title, a heading, a note) in the page's
// language.
func L(ctx context.Context, english string) string { return i18n.From(ctx).Text(english) }

// Num writes n as the page's language writes numbers.
func Num(ctx context.Context, n int) string { return i18n.From(ctx).Num(n) }

// age says how long ago t was, in the page's language.
func age(ctx context.Context, t, now time.Time) string { return i18n.From(ctx).Age(t, now) }

// dateTime writes a moment in the page's language.
func dateTime(ctx context.Context, t time.Time) string { return i18n.From(ctx).DateTime(t) }

// langOf is the code of the page's language, for <html lang>.
func langOf(ctx context.Context) string { return i18n.Tag(i18n.From(ctx).Code) }

// LangSwitch is a link to the page in each other language.
type LangSwitch struct {
	Code, Name, URL string
}

// switches are the links to the page here in the other languages: the
// same page, with ?lang=, which the server remembers and drops.
func switches(ctx context.Context, here string) []LangSwitch {
	cur := i18n.From(ctx).Code
	u, err := url.Parse(here)
	if err != nil || here == "" {
		u = &url.URL{Path: "/"}
	}
	var out []LangSwitch
	for _, code := range i18n.Codes {
		if code == cur {
			continue
		}
		q := u.Query()
		q.Set("lang", code)
		out = append(out, LangSwitch{Code: code, Name: i18n.Autonym[code], URL: u.Path + "?" + q.Encode()})
	}
	return out
}

// htmlLang is the lang attribute of a language code.
func htmlLang(code string) string { return i18n.Tag(code) }

// whyStopped is why a session or agent failed or was stopped, as a person
// reads it: its stopped_by code worded, else its error code worded (one
// with words of its own, i18n.ErrorKey), else its error (a log written
// before the codes, or a failure the run itself met).
func whyStopped(ctx context.Context, err, stoppedBy, code string) string {
	if stoppedBy != "" {
		return T(ctx, i18n.StopKey(stoppedBy))
	}
	if key := i18n.ErrorKey(code); key != "" {
		return T(ctx, key)
	}
	return err
}

// statusKey is the catalogue's word for a session's or agent's status.
func statusKey(status string) string {
	switch status {
	case "running":
		return "state.running"
	case "done":
		return "state.done"
	case "failed":
		return "state.failed"
	case "interrupted":
		return "state.interrupted"
	case "not started", "pending":
		return "state.pending"
	}
	return "state.unknown"
}

// figureKey is the catalogue's name of a comparison's figure.
func figureKey(key string) string {
	switch key {
	case "agents":
		return "compare.fig.agents"
	case "children":
		return "compare.fig.children"
	case "calls":
		return "compare.fig.calls"
	case "tokens":
		return "compare.fig.tokens"
	case "entry":
		return "compare.fig.entry"
	case "inherited":
		return "compare.fig.inherited"
	case "notes":
		return "compare.fig.notes"
	case "files":
		return "compare.fig.files"
	case "duration":
		return "compare.fig.duration"
	case "cached":
		return "compare.fig.cached"
	case "uncached":
		return "compare.fig.uncached"
	case "entry-cached":
		return "compare.fig.entry_cached"
	case "cost":
		return "compare.fig.cost"
	}
	return ""
}

// figureLabel names a comparison's figure in the page's language.
func figureLabel(ctx context.Context, f Figure) string {
	if k := figureKey(f.Key); k != "" {
		return T(ctx, k)
	}
	return f.Label
}

// percentText is PercentOf in the page's language ("new" when A is 0).
func percentText(ctx context.Context, a, b float64) string {
	if a == 0 && b != 0 {
		return T(ctx, "compare.new")
	}
	return PercentOf(a, b)
}

// TextPart is a piece of a lesson's text: its own words, or a quotation
// of a run's data (a receipt, a task), which no language translates.
type TextPart struct {
	Text   string
	Quoted bool
}

// quoteParts splits a text at its quotations ("…", “…”), as i18n.Key
// carries them over untranslated.
func quoteParts(s string) []TextPart {
	var out []TextPart
	last := 0
	for _, loc := range quotation().FindAllStringIndex(s, -1) {
		if loc[0] > last {
			out = append(out, TextPart{Text: s[last:loc[0]]})
		}
		out = append(out, TextPart{Text: s[loc[0]:loc[1]], Quoted: true})
		last = loc[1]
	}
	if last < len(s) {
		out = append(out, TextPart{Text: s[last:]})
	}
	return out
}

var quotation = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"(?:[^"\\]|\\.)*"|“[^”]*”`) })

// writeCostEnd says what of a child's cost went to writing the prompt cache
// at the cache-write surcharge; "" when nothing did.
func writeCostEnd(ctx context.Context, c CameBackView) string {
	if c.ChildWriteCost == "" {
		return ""
	}
	return T(ctx, "sess.econ.cost_writes", "Cost", c.ChildWriteCost)
}

// keptEnd ends the sentence of what a receipt kept out of the parent: its
// price when priced, else a full stop — right after the figure, with no
// space before it.
func keptEnd(ctx context.Context, c CameBackView) string {
	if c.KeptCost != "" {
		return T(ctx, "sess.econ.kept_cost", "Cost", c.KeptCost)
	}
	return T(ctx, "punct.stop")
}
