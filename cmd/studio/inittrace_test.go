package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Every process pays for every package's initialisation, `studio
// --version` included: a package of ours that builds a table at init
// (internal/i18n parsed its catalogues there: 10 MB in 90,600 allocations)
// slows every command. The bounds are about one and a half times the
// largest package's today (internal/delegation: about 27 KB, 220
// allocations, since the regexps, fonts, price table and printers of
// delegation, view, pricing, session and lessons are made on first use;
// before, internal/delegation took 88 KB and view 60 KB); what needs
// more is made when first used, or generated ahead (go generate), as the
// token tables and the catalogues are.
const (
	initBytesBound  = 40 << 10
	initAllocsBound = 400
)

// TestInitAllocatesLittle runs the binary with GODEBUG=inittrace=1 and
// fails when a package of this module allocates more than the bounds in
// its initialisation.
func TestInitAllocatesLittle(t *testing.T) {
	module := modulePath(t)
	cmd := exec.Command(studioBinary(t), "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("studio --version: %v\n%s", err, stderr.String())
	}
	inits, err := parseInitTrace(stderr.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	ours := 0
	for _, in := range inits {
		if in.pkg != module && !strings.HasPrefix(in.pkg, module+"/") {
			continue
		}
		ours++
		if in.bytes > initBytesBound || in.allocs > initAllocsBound {
			t.Errorf("%s allocates %d bytes in %d allocations at init (bounds: %d bytes, %d allocations): make what it builds when first used, or generate it ahead",
				in.pkg, in.bytes, in.allocs, initBytesBound, initAllocsBound)
		}
	}
	// The trace names every package with an init; ours include the
	// engine's. None found means the trace was not read.
	if ours == 0 {
		t.Fatalf("inittrace named no package of %s:\n%s", module, stderr.String())
	}
}

type initCost struct {
	pkg           string
	bytes, allocs int64
}

// parseInitTrace reads the runtime's inittrace lines:
//
//	init PKG @T ms, C ms clock, N bytes, M allocs
func parseInitTrace(out []byte) ([]initCost, error) {
	var inits []initCost
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "init ") {
			continue
		}
		f := strings.Fields(line)
		// init PKG @T ms, C ms clock, N bytes, M allocs
		if len(f) != 11 || f[8] != "bytes," || f[10] != "allocs" {
			return nil, fmt.Errorf("inittrace line not understood: %q", line)
		}
		n, err1 := strconv.ParseInt(f[7], 10, 64)
		m, err2 := strconv.ParseInt(f[9], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("inittrace line not understood: %q", line)
		}
		inits = append(inits, initCost{pkg: f[1], bytes: n, allocs: m})
	}
	return inits, sc.Err()
}

func TestParseInitTrace(t *testing.T) {
	got, err := parseInitTrace([]byte("studio dev\ninit github.com/x/y @187 ms, 0.24 ms clock, 34616 bytes, 346 allocs\n"))
	if err != nil || len(got) != 1 || got[0] != (initCost{"github.com/x/y", 34616, 346}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := parseInitTrace([]byte("init github.com/x/y @187 ms, 0.24 ms clock, 34616 bytes\n")); err == nil {
		t.Fatal("a line without its allocations was read")
	}
}

// modulePath is this module's path, from go.mod.
func modulePath(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if p, ok := strings.CutPrefix(line, "module "); ok {
			return strings.TrimSpace(p)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}
