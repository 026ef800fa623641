package templates

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	templparser "github.com/a-h/templ/parser/v2"

	"github.com/delegationstudio/studio/internal/i18n"
)

// words is a run of Latin letters a reader would read as a word.
var words = regexp.MustCompile(`[A-Za-z]{2,}`)

// readAttrs are the attributes a person reads (or a screen reader says).
var readAttrs = map[string]bool{"title": true, "placeholder": true, "aria-label": true, "alt": true, "label": true, "value": false}

// No .templ file holds a word of its own: its texts, the attributes a
// person reads and the string literals it prints all come from the
// catalogue. Only <code> (identifiers, flags, JSON) and <script>/<style>
// are exempt.
func TestTemplatesSayNothingOfTheirOwn(t *testing.T) {
	files, err := filepath.Glob("*.templ")
	if err != nil || len(files) == 0 {
		t.Fatalf("no templ files: %v", err)
	}
	for _, f := range files {
		tf, err := templparser.Parse(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		w := &literalWalker{t: t, file: f}
		for _, n := range tf.Nodes {
			switch n := n.(type) {
			case *templparser.HTMLTemplate:
				w.nodes(n.Children, false)
			case *templparser.TemplateFileGoExpression:
				w.goCode(n.Expression.Range, n.Expression.Value)
			}
		}
	}
}

type literalWalker struct {
	t    *testing.T
	file string
}

// goCode holds the Go code of a .templ file (its helper functions) to the
// same rule: no prose of its own, only catalogue ids.
func (w *literalWalker) goCode(r templparser.Range, src string) {
	f, err := parser.ParseFile(token.NewFileSet(), w.file, "package templates\n"+src, 0)
	if err != nil {
		return // a type or an import block: no literal prose there
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if _, ok := n.(*ast.ImportSpec); ok {
			return false
		}
		w.lit(r, n)
		return true
	})
}

func (w *literalWalker) fail(r templparser.Range, what, text string) {
	w.t.Helper()
	w.t.Errorf("%s:%d: %s %q is not from the catalogue (use T, N, Rich or L)", w.file, r.From.Line+1, what, strings.TrimSpace(text))
}

func (w *literalWalker) nodes(ns []templparser.Node, code bool) {
	for _, n := range ns {
		w.node(n, code)
	}
}

func (w *literalWalker) node(n templparser.Node, code bool) {
	switch n := n.(type) {
	case *templparser.Text:
		if !code && words.MatchString(n.Value) {
			w.fail(n.Range, "text", n.Value)
		}
	case *templparser.Element:
		inCode := code || n.Name == "code" || n.Name == "pre" || n.Name == "kbd"
		for _, a := range n.Attributes {
			w.attr(a)
		}
		w.nodes(n.Children, inCode)
	case *templparser.StringExpression:
		w.expr(n.Range, n.Expression.Value, code)
	case *templparser.IfExpression:
		w.nodes(n.Then, code)
		for _, ei := range n.ElseIfs {
			w.nodes(ei.Then, code)
		}
		w.nodes(n.Else, code)
	case *templparser.SwitchExpression:
		for _, c := range n.Cases {
			w.nodes(c.Children, code)
		}
	case *templparser.ForExpression:
		w.nodes(n.Children, code)
	case *templparser.TemplElementExpression:
		w.expr(n.Range, n.Expression.Value, code)
		w.nodes(n.Children, code)
	case *templparser.CallTemplateExpression:
		w.expr(templparser.Range{}, n.Expression.Value, code)
	}
}

func (w *literalWalker) attr(a templparser.Attribute) {
	switch a := a.(type) {
	case *templparser.ConstantAttribute:
		if readAttrs[a.Key.String()] && words.MatchString(a.Value) {
			w.fail(a.Range, a.Key.String()+" attribute", a.Value)
		}
	case *templparser.ExpressionAttribute:
		if readAttrs[a.Key.String()] {
			w.expr(a.Range, a.Expression.Value, false)
		}
	case *templparser.ConditionalAttribute:
		for _, x := range a.Then {
			w.attr(x)
		}
		for _, x := range a.Else {
			w.attr(x)
		}
	}
}

// expr fails on a Go string literal that reads as prose (two words), other
// than a catalogue id given to T, N or Rich, which must exist.
func (w *literalWalker) expr(r templparser.Range, src string, code bool) {
	if code {
		return
	}
	e, err := parser.ParseExpr(src)
	if err != nil {
		return // a templ call with children, a for clause: its parts are walked
	}
	ast.Inspect(e, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if id, ok := call.Fun.(*ast.Ident); ok && (id.Name == "T" || id.Name == "N" || id.Name == "Rich") && len(call.Args) >= 2 {
				if lit, ok := call.Args[1].(*ast.BasicLit); ok {
					key, _ := strconv.Unquote(lit.Value)
					w.key(r, key)
				}
				for _, a := range call.Args[2:] {
					ast.Inspect(a, func(n ast.Node) bool { w.lit(r, n); return true })
				}
				return false
			}
		}
		w.lit(r, n)
		return true
	})
}

var prose = regexp.MustCompile(`[A-Za-z]{2,}[,.:;]? +[A-Za-z]{2,}`)

func (w *literalWalker) lit(r templparser.Range, n ast.Node) {
	lit, ok := n.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return
	}
	s, _ := strconv.Unquote(lit.Value)
	if isID(s) {
		w.key(r, s)
		return
	}
	if prose.MatchString(s) && !strings.HasPrefix(s, "{") && !strings.Contains(s, "/") {
		w.fail(r, "string", s)
	}
}

var idLike = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$`)

// isID says whether a literal is a catalogue id (or meant to be one: its
// first part names a table of the catalogue).
func isID(s string) bool {
	if !idLike.MatchString(s) {
		return false
	}
	table := strings.SplitN(s, ".", 2)[0]
	for _, id := range i18n.IDs(i18n.English) {
		if strings.HasPrefix(id, table+".") {
			return true
		}
	}
	return false
}

func (w *literalWalker) key(r templparser.Range, key string) {
	en, zh := i18n.Get(i18n.English), i18n.Get(i18n.Chinese)
	if en.T(key) == key || zh.T(key) == key {
		w.t.Errorf("%s:%d: %q is not in both catalogues", w.file, r.From.Line+1, key)
	}
}

// Every catalogue id the Go code names — a literal given to T, N or HTML,
// or returned as a key — is in both catalogues.
func TestCodeNamesOnlyCatalogueIDs(t *testing.T) {
	ids := map[string]bool{}
	for _, id := range i18n.IDs(i18n.English) {
		ids[id] = true
	}
	zh := map[string]bool{}
	for _, id := range i18n.IDs(i18n.Chinese) {
		zh[id] = true
	}
	tables := map[string]bool{}
	for id := range ids {
		tables[strings.SplitN(id, ".", 2)[0]] = true
	}
	keyLike := regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$`)
	var files []string
	for _, dir := range []string{".", "../../internal/server"} {
		fs, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		files = append(files, fs...)
	}
	used := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, "_templ.go") { // the .templ files are read above
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, _ := strconv.Unquote(lit.Value)
			if !keyLike.MatchString(s) || !tables[strings.SplitN(s, ".", 2)[0]] {
				return true
			}
			used++
			if !ids[s] || !zh[s] {
				t.Errorf("%s: %q names no message of both catalogues", f, s)
			}
			return true
		})
	}
	if used < 10 {
		t.Fatalf("only %d catalogue ids found in the code: is the scan broken?", used)
	}
}
