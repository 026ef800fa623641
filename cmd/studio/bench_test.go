package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/benchdata"
)

// BenchmarkPeakRSS runs the studio binary on the 200 + 50 step scenario,
// storing the session, and reports the process's peak resident memory.
func BenchmarkPeakRSS(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "studio")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	scen := filepath.Join(dir, "bench.json")
	if err := os.WriteFile(scen, benchdata.LongScenario(200, 50), 0o644); err != nil {
		b.Fatal(err)
	}
	var peak int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(bin, "run", scen, "--db", filepath.Join(dir, fmt.Sprintf("s%d.db", i)))
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("run: %v\n%s", err, out)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = max(peak, ru.Maxrss) // kilobytes on Linux
		}
	}
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MB")
}

// BenchmarkStartup runs the studio binary on the example, headless, and
// `studio --version` beside it, in turns: the run's wall time and peak RSS
// as ratios to --version's (the process start, the runtime and every
// package's initialisation), measured in the same run. The target of the
// issue was "run in ≤ 25 ms and ≤ 25 MB, ≤ 3× --version".
func BenchmarkStartup(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "studio")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	measure := func(args ...string) (time.Duration, int64) {
		cmd := exec.Command(bin, args...)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", args, err, out)
		}
		took := time.Since(start)
		ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		return took, ru.Maxrss // kilobytes on Linux
	}
	var runT, verT []time.Duration
	var runRSS, verRSS int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, rss := measure("--version")
		verT, verRSS = append(verT, t), max(verRSS, rss)
		t, rss = measure("run", example)
		runT, runRSS = append(runT, t), max(runRSS, rss)
	}
	run, ver := median(runT), median(verT)
	b.ReportMetric(float64(run.Microseconds())/1000, "run-ms")
	b.ReportMetric(float64(ver.Microseconds())/1000, "version-ms")
	b.ReportMetric(float64(run)/float64(ver), "run/version-time")
	b.ReportMetric(float64(runRSS)/1024, "run-peak-RSS-MB")
	b.ReportMetric(float64(runRSS)/float64(verRSS), "run/version-RSS")
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
