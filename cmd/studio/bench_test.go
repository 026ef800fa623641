package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

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
