package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/benchdata"
	"github.com/delegationstudio/studio/internal/db"
)

// BenchmarkPeakRSS runs the studio binary on the 200 + 50 step scenario,
// storing the session, and reports the process's peak resident memory.
func BenchmarkPeakRSS(b *testing.B) {
	dir := b.TempDir()
	bin := buildStudio(b, dir)
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
// package's initialisation), measured in the same run. Targets (issue 30):
// the run ≤ 1.5× --version in time, ≤ 25 MB of peak RSS.
func BenchmarkStartup(b *testing.B) {
	dir := b.TempDir()
	bin := buildStudio(b, dir)
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

// storedSession runs benchdata.Messages(n) with the studio binary into a
// new database and returns the database and the session's id.
func storedSession(b *testing.B, bin, dir string, n int) (string, string) {
	b.Helper()
	scen := filepath.Join(dir, fmt.Sprintf("messages-%d.json", n))
	if err := os.WriteFile(scen, benchdata.Messages(n), 0o644); err != nil {
		b.Fatal(err)
	}
	dbPath := filepath.Join(dir, fmt.Sprintf("messages-%d.db", n))
	if out, err := exec.Command(bin, "run", scen, "--db", dbPath).CombinedOutput(); err != nil {
		b.Fatalf("run: %v\n%s", err, out)
	}
	d, err := db.Open(context.Background(), dbPath)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	list, err := d.Sessions(context.Background(), 1)
	if err != nil || len(list) != 1 {
		b.Fatalf("sessions: %v", err)
	}
	return dbPath, list[0].ID
}

// buildStudio builds the studio binary into dir.
func buildStudio(b *testing.B, dir string) string {
	b.Helper()
	bin := filepath.Join(dir, "studio")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// exportCost runs `studio export` and returns the bytes it printed and the
// process's peak resident memory in bytes.
func exportCost(b *testing.B, bin string, args ...string) (int64, int64) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	var out countingWriter
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		b.Fatalf("%v: %v\n%s", args, err, errOut.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatal("no rusage")
	}
	return out.n, ru.Maxrss * 1024 // kilobytes on Linux
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// BenchmarkOTLPScaling exports, as OTLP/JSON, a session of 1,000 and one of
// 2,000 messages, and reports what doubling the session costs: the ratio of
// the output's bytes and of the exporting process's peak RSS. Target: both
// ≤ 2.2 (linear; the export used to be quadratic).
func BenchmarkOTLPScaling(b *testing.B) {
	dir := b.TempDir()
	bin := buildStudio(b, dir)
	db1, id1 := storedSession(b, bin, dir, 1000)
	db2, id2 := storedSession(b, bin, dir, 2000)
	var bytes1, bytes2, rss1, rss2 int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n1, r1 := exportCost(b, bin, "export", id1, "--format", "otlp", "--db", db1)
		n2, r2 := exportCost(b, bin, "export", id2, "--format", "otlp", "--db", db2)
		bytes1, bytes2 = n1, n2
		rss1, rss2 = max(rss1, r1), max(rss2, r2)
	}
	b.StopTimer()
	traceBytes, _ := exportCost(b, bin, "export", id2, "--db", db2)
	b.ReportMetric(float64(bytes2)/float64(bytes1), "bytes-ratio")
	b.ReportMetric(float64(rss2)/float64(rss1), "rss-ratio")
	b.ReportMetric(float64(bytes2)/1e6, "MB-at-2k")
	b.ReportMetric(float64(bytes2)/float64(traceBytes), "otlp/trace")
	b.ReportMetric(float64(rss2)/1e6, "RSS-MB-at-2k")
}

// BenchmarkTraceExport100k serves a session of 100,000 messages and
// reports how far the server's resident memory rises above idle while it
// streams the session's trace (GET /api/sessions/{id}/trace) and its OTLP
// (…/otlp). Target for the trace: ≤ 64 MB.
func BenchmarkTraceExport100k(b *testing.B) {
	dir := b.TempDir()
	bin := buildStudio(b, dir)
	dbPath, id := storedSession(b, bin, dir, 100_000)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", dbPath)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	var url string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "Delegation Studio on "); ok {
			url = strings.Fields(u)[0]
			break
		}
	}
	if url == "" {
		b.Fatal("studio serve did not say where it listens")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	get := func(path string) int64 {
		res, err := http.Get(url + path)
		if err != nil || res.StatusCode != 200 {
			b.Fatalf("GET %s: %v %v", path, err, res)
		}
		defer res.Body.Close()
		n, err := io.Copy(io.Discard, res.Body)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	get("/api/sessions") // warm up: the first request's allocations are not the export's
	var traceAbove, otlpAbove, traceBytes, otlpBytes int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		idle := resetPeak(b, cmd.Process.Pid)
		traceBytes = get("/api/sessions/" + id + "/trace")
		traceAbove = max(traceAbove, procStatus(b, cmd.Process.Pid, "VmHWM")-idle)
		idle = resetPeak(b, cmd.Process.Pid)
		otlpBytes = get("/api/sessions/" + id + "/otlp")
		otlpAbove = max(otlpAbove, procStatus(b, cmd.Process.Pid, "VmHWM")-idle)
	}
	b.ReportMetric(float64(traceAbove)/1e6, "trace-RSS-MB-above-idle")
	b.ReportMetric(float64(traceBytes)/1e6, "trace-MB")
	b.ReportMetric(float64(otlpAbove)/1e6, "otlp-RSS-MB-above-idle")
	b.ReportMetric(float64(otlpBytes)/1e6, "otlp-MB")
}

// resetPeak returns a process's resident memory, after resetting its peak
// (VmHWM) to it, so the next peak read is of what follows.
func resetPeak(b testing.TB, pid int) int64 {
	b.Helper()
	runtime.GC() // ours, not the server's: keeps this process's noise out of the machine's
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS (needs Linux and the right to write clear_refs): %v", err)
	}
	return procStatus(b, pid, "VmRSS")
}

// procStatus reads a memory figure of /proc/PID/status, in bytes.
func procStatus(b testing.TB, pid int, key string) int64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb * 1024
		}
	}
	b.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

// BenchmarkRunJSON runs `studio run --json` on a session of about 25,000
// model calls and one of 3,125 (benchdata.Messages of 50,000 and 6,250
// messages) and reports the peak RSS of the larger ÷ the smaller (issue 30's
// target: ×8 the session, ≤ ×1.3 the peak) and ÷ its output's bytes.
func BenchmarkRunJSON(b *testing.B) {
	dir := b.TempDir()
	bin := buildStudio(b, dir)
	scen := func(n int) string {
		p := filepath.Join(dir, fmt.Sprintf("messages-%d.json", n))
		if err := os.WriteFile(p, benchdata.Messages(n), 0o644); err != nil {
			b.Fatal(err)
		}
		return p
	}
	small, large := scen(6_250), scen(50_000)
	var rssS, rssL, outL int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, r1 := exportCost(b, bin, "run", small, "--json")
		n2, r2 := exportCost(b, bin, "run", large, "--json")
		rssS, rssL, outL = max(rssS, r1), max(rssL, r2), n2
	}
	b.ReportMetric(float64(rssL)/float64(rssS), "peak-x8/x1")
	b.ReportMetric(float64(rssL)/float64(outL), "peak/output")
	b.ReportMetric(float64(rssL)/1e6, "peak-MB-25k")
	b.ReportMetric(float64(outL)/1e6, "output-MB-25k")
}
