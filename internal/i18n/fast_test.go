package i18n

import (
	"math"
	"testing"

	"golang.org/x/text/message"
)

// The fast path writes every message as go-i18n does: each id of both
// catalogues, as T and as N for counts of every plural form, with the data
// its fields name, with some missing, with a name given twice, and with
// values of several types.
func TestFastMessagesAreWhatGoI18nWrites(t *testing.T) {
	for _, code := range Codes {
		l := Get(code)
		if len(l.fast) < len(IDs(code))*9/10 {
			t.Errorf("%s: only %d of %d messages take the fast path", code, len(l.fast), len(IDs(code)))
		}
		for _, id := range IDs(code) {
			var fields []string
			for _, f := range catalogueMessages(code) {
				if m, ok := f[id]; ok {
					for _, src := range []string{m.Zero, m.One, m.Two, m.Few, m.Many, m.Other} {
						for _, sm := range templateField().FindAllStringSubmatch(src, -1) {
							fields = append(fields, sm[1])
						}
					}
				}
			}
			all, some, twice := []any{}, []any{}, []any{}
			for i, f := range fields {
				all = append(all, f, Data("v<"+f+">"))
				if i%2 == 0 {
					some = append(some, f, i*1000+7)
				}
				twice = append(twice, f, "first", f, 3.5)
			}
			for _, kv := range [][]any{nil, all, some, twice, append(all, "odd")} {
				if got, want := l.T(id, kv...), l.slowT(id, kv...); got != want {
					t.Errorf("%s T(%q, %v) = %q, go-i18n writes %q", code, id, kv, got, want)
				}
				for _, n := range []int{0, 1, 2, 3, 5, 11, 21, 100, 1001, -1, -1234567} {
					if got, want := l.N(id, n, kv...), l.slowN(id, n, kv...); got != want {
						t.Errorf("%s N(%q, %d, %v) = %q, go-i18n writes %q", code, id, n, kv, got, want)
					}
				}
			}
		}
	}
}

// Num writes what x/text's printer writes for each language.
func TestNumIsThePrinters(t *testing.T) {
	ns := []int{0, 7, -7, 999, 1000, -1000, 12345, 999999, 1000000, -1234567, math.MaxInt64, math.MinInt64 + 1}
	for p := 1; p < 1e15; p *= 7 {
		ns = append(ns, p, -p, p-1)
	}
	for _, code := range Codes {
		pr := message.NewPrinter(tags[code])
		for _, n := range ns {
			if got, want := Get(code).Num(n), pr.Sprintf("%d", n); got != want {
				t.Errorf("%s Num(%d) = %q, the printer writes %q", code, n, got, want)
			}
		}
	}
}

func BenchmarkN(b *testing.B) {
	l := Get(English)
	b.Run("fast", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			_ = l.N("count.model_calls", i)
		}
	})
	b.Run("go-i18n", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			_ = l.slowN("count.model_calls", i)
		}
	})
}
