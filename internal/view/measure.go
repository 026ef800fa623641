package view

import (
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/sfnt"
	"golang.org/x/image/math/fixed"
)

// The tree's labels are laid out from their measured widths: the page draws
// them in the Go fonts (web/static serves these very files, and the SVG's
// text asks for them with kerning off), so a width measured here is the
// width the browser draws. A character the Go fonts lack (CJK, most
// symbols) falls back to another font; it is counted a full em, as CJK
// ideographs are, which is at least as wide as those fallbacks draw.

// FontRegular and FontBold are the fonts of the tree's labels.
var (
	FontRegular = goregular.TTF
	FontBold    = gobold.TTF
)

// face is one of the fonts, with the advances of the runes asked for so far.
// Those of printable ASCII, most of any label, are read once, up front,
// so that measuring them takes neither a lock nor a map.
type face struct {
	f     *sfnt.Font
	upem  float64
	ascii [128]float64 // in ems, from ' ' on
	mu    sync.Mutex
	buf   sfnt.Buffer
	adv   map[rune]float64 // in ems, the other runes asked for so far
}

var (
	// The faces are parsed on first use, so that a process that draws no
	// tree (the CLI's run, export, validate) pays nothing for them.
	regular = sync.OnceValue(func() *face { return mustFace(FontRegular) })
	bold    = sync.OnceValue(func() *face { return mustFace(FontBold) })
)

func mustFace(ttf []byte) *face {
	f, err := sfnt.Parse(ttf)
	if err != nil {
		panic("view: the Go font does not parse: " + err.Error())
	}
	fc := &face{f: f, upem: float64(f.UnitsPerEm()), adv: map[rune]float64{}}
	for r := ' '; r < 128; r++ {
		fc.ascii[r] = fc.lookup(r)
	}
	return fc
}

// em is a rune's advance in ems.
func (fc *face) em(r rune) float64 {
	if r >= ' ' && r < 128 {
		return fc.ascii[r]
	}
	return fc.lookup(r)
}

func (fc *face) lookup(r rune) float64 {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if a, ok := fc.adv[r]; ok {
		return a
	}
	a := 1.0
	if g, err := fc.f.GlyphIndex(&fc.buf, r); err == nil && g != 0 {
		if x, err := fc.f.GlyphAdvance(&fc.buf, g, fixed.Int26_6(fc.upem*64), font.HintingNone); err == nil {
			a = float64(x) / 64 / fc.upem
		}
	}
	fc.adv[r] = a
	return a
}

// width is how wide s is drawn at size px.
func (fc *face) width(s string, size float64) float64 {
	w := 0.0
	for _, r := range s {
		w += fc.em(r)
	}
	return w * size
}

// fit cuts s to at most max px at size, ending it with "…" when cut.
func (fc *face) fit(s string, size, maxW float64) string {
	if fc.width(s, size) <= maxW {
		return s
	}
	ell := fc.width("…", size)
	w := 0.0
	for i, r := range s {
		w += fc.em(r) * size
		if w+ell > maxW {
			return trimRight(s[:i]) + "…"
		}
	}
	return s
}

func trimRight(s string) string {
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == ',') {
		s = s[:len(s)-1]
	}
	return s
}

// TextWidth is how wide the tree draws s, in px, in its regular font (or
// its bold one) at size px: for tests that check the layout's arithmetic.
func TextWidth(s string, size float64, isBold bool) float64 {
	if isBold {
		return bold().width(s, size)
	}
	return regular().width(s, size)
}
