package present

import (
	stdhtml "html"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

// Finding 9 of issue 21: live-patch selectors were built from raw ids, so
// an imported id could widen what a patch selects.
func TestSelectorsAreEscaped(t *testing.T) {
	ids := []string{"main", "a1.c0", `x"],[data-list`, `back\slash`, "new\nline", "tab\tand\x7f", "ünï"}
	var page strings.Builder
	page.WriteString(`<ol data-list="other"></ol>`)
	for _, id := range ids {
		page.WriteString(`<ol data-list="` + stdhtml.EscapeString(id) + `"></ol>`)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(page.String()))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		sel := attrIs("data-list", id)
		found := doc.Find(sel)
		if found.Length() != 1 || found.AttrOr("data-list", "") != id {
			t.Errorf("%s selects %d elements", sel, found.Length())
		}
	}
}
