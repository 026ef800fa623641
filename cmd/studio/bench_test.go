package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
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
	if err := os.WriteFile(scen, benchScenario(200, 50), 0o644); err != nil {
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

func benchScenario(mainSteps, childSteps int) []byte {
	turn := func(i int, who string) map[string]any {
		return map[string]any{"content": fmt.Sprintf("Looking at step %d.", i), "tool_calls": []any{map[string]any{
			"name": "write_file", "args": map[string]any{"file_path": fmt.Sprintf("/%s/notes-%d.md", who, i),
				"content": fmt.Sprintf("Step %d: the checksum of block %d is 0x%x.", i, i, i*7919)}}}}
	}
	var main, child []any
	for i := 0; i < mainSteps-1; i++ {
		main = append(main, turn(i, "main"))
	}
	main = append(main, map[string]any{"tool_calls": []any{map[string]any{"name": "task", "args": map[string]any{
		"description": "Report the largest checksum.", "subagent_type": "general-purpose"}}}}, map[string]any{"content": "Done."})
	for i := 0; i < childSteps-1; i++ {
		child = append(child, turn(i, "child"))
	}
	child = append(child, map[string]any{"content": "0x1792f"})
	doc, _ := json.Marshal(map[string]any{"name": "bench", "prompt": "Go.", "agent": map[string]any{"max_steps": mainSteps + 10},
		"subagents": []any{map[string]any{"name": "general-purpose", "description": "Does the work.", "max_steps": childSteps + 10}},
		"script":    map[string]any{"main": main, "general-purpose": []any{child}}})
	return doc
}
