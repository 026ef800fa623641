package schema

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// unknownKeyBomb is a scenario of about size bytes, nearly all of it
// unknown top-level keys, each keyLen characters long.
func unknownKeyBomb(size, keyLen int) []byte {
	var b strings.Builder
	b.WriteString(`{"name": "bomb", "prompt": "p", "script": {"main": [{"content": "a"}]}`)
	for i := 0; b.Len() < size; i++ {
		key := fmt.Sprintf("k%0*d", keyLen-1, i)
		fmt.Fprintf(&b, `, %q: 1`, key)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Finding 3 of issue 21: unknown keys each got suggestions built with fresh
// replacers and a full edit distance, with no cap on errors (a 2.2 MB body
// took 31 s and allocated 48 GB).
func TestUnknownKeyBombIsBounded(t *testing.T) {
	doc := unknownKeyBomb(2<<20, 24)
	var errs []FieldError
	alloc := allocated(func() { errs = ValidateScenario(doc) })
	if got, want := len(errs), MaxErrors+1; got != want {
		t.Fatalf("%d errors, want %d (the first %d, then one counting the rest)", got, want, MaxErrors)
	}
	last := errs[len(errs)-1]
	if last.Field != "" || !strings.HasPrefix(last.Message, "and ") || !strings.Contains(last.Message, "more problems") {
		t.Fatalf("the last entry is %v; want one counting the problems not listed", last)
	}
	if !strings.HasPrefix(errs[0].Message, `unknown field "k`) {
		t.Fatalf("first error %v", errs[0])
	}
	// The document is parsed, so some multiple of it is allocated; the old
	// reporter allocated over 10,000 bytes per byte.
	if perByte := alloc / uint64(len(doc)); perByte > 200 {
		t.Fatalf("validating a %d-byte bomb allocated %d bytes per byte; want at most 200", len(doc), perByte)
	}
}

func TestOneLongKeyIsReportedShort(t *testing.T) {
	key := strings.Repeat("k", 4<<20)
	doc := []byte(`{"name": "x", "prompt": "p", "script": {"main": [{"content": "a"}]}, "` + key + `": 1,` +
		`"tokenizer": "` + strings.Repeat("o", 1<<20) + `"}`)
	var errs []FieldError
	alloc := allocated(func() { errs = ValidateScenario(doc) })
	if len(errs) != 2 {
		t.Fatalf("errors %d, want 2", len(errs))
	}
	for _, e := range errs {
		if len(e.Error()) > 400 {
			t.Fatalf("an error of %d bytes: %.200s…", len(e.Error()), e.Error())
		}
	}
	if perByte := alloc / uint64(len(doc)); perByte > 100 {
		t.Fatalf("allocated %d bytes per byte of a document with one long key", perByte)
	}
}

func TestInvalidUTF8IsReported(t *testing.T) {
	doc := []byte("{\"name\": \"x\",\n \"prompt\": \"caf\xe9\"}")
	errs := ValidateScenario(doc)
	if len(errs) != 1 || errs[0].Message != "the file is not valid UTF-8: at line 2, column 16 (byte 30): save it as UTF-8" {
		t.Fatalf("got %v", errs)
	}
	if errs := ValidateTrace(doc); len(errs) != 1 || !strings.Contains(errs[0].Message, "not valid UTF-8") {
		t.Fatalf("trace: %v", errs)
	}
}

func TestValidationStopsWhenTheClientLeaves(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs, err := ValidateScenarioContext(ctx, unknownKeyBomb(64<<10, 24))
	if err != context.Canceled || errs != nil {
		t.Fatalf("got %d errors and %v; want nothing but context.Canceled", len(errs), err)
	}
}

func TestSchemasLoadNothing(t *testing.T) {
	if _, err := (noLoader{}).Load("file:///etc/passwd"); err == nil || !strings.Contains(err.Error(), "outside the schema") {
		t.Fatalf("noLoader loaded a file: %v", err)
	}
}

// BenchmarkUnknownKeyBomb validates scenarios made of unknown keys, of 256
// KiB and 2 MiB, in one run: the time of the larger, how its cost grows with
// the size (x8), and the bytes allocated per byte of document.
func BenchmarkUnknownKeyBomb(b *testing.B) {
	small, large := unknownKeyBomb(256<<10, 24), unknownKeyBomb(2<<20, 24)
	var ratio, ms, perByte float64
	for b.Loop() {
		start := time.Now()
		ValidateScenario(small)
		t0 := time.Since(start)
		var t1 time.Duration
		alloc := allocated(func() {
			start = time.Now()
			ValidateScenario(large)
			t1 = time.Since(start)
		})
		ratio += float64(t1) / float64(t0)
		ms += float64(t1.Milliseconds())
		perByte += float64(alloc) / float64(len(large))
	}
	n := float64(b.N)
	b.ReportMetric(ms/n, "ms-2MiB")
	b.ReportMetric(ratio/n, "size-x8")
	b.ReportMetric(perByte/n, "alloc/byte")
}
