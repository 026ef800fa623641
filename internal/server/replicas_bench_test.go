package server

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkReplicaLatency: from the engine's event to a viewer of the
// session, on the replica that runs it (its recorder publishes it) and on
// another replica (the store's NOTIFY, then a read of the table), both
// studios on one PostgreSQL database (STUDIO_TEST_POSTGRES); and, as the
// baseline, on one studio on SQLite. Ten viewers each, in this process.
// Reports the p99s and their ratios; the other replica's p99 is the
// notify-to-viewer figure of docs/postgres.md.
func BenchmarkReplicaLatency(b *testing.B) {
	scenario := slowScenario(150, 10)
	for b.Loop() {
		lite := startStudioOn(b, filepath.Join(b.TempDir(), "studio.db"), Config{})
		base := watchAll(b, lite.start(b, scenario), lite)[0]
		rs := startReplicas(b, 2)
		a, o := rs[0], rs[1]
		lat := watchAll(b, a.start(b, scenario), a, o)
		pl, pa, po := p99(base), p99(lat[0]), p99(lat[1])
		b.ReportMetric(ms(pct(lat[0], 50)), "p50-ms-running-replica")
		b.ReportMetric(ms(pct(lat[1], 50)), "p50-ms-other-replica")
		b.ReportMetric(ms(pl), "p99-ms-sqlite")
		b.ReportMetric(ms(pa), "p99-ms-running-replica")
		b.ReportMetric(ms(po), "p99-ms-other-replica")
		b.ReportMetric(ms(po)/ms(pa), "other/running")
		b.ReportMetric(ms(po)/ms(pl), "other/sqlite")
		b.ReportMetric(float64(len(lat[1])), "deliveries-other")
	}
}

// watchAll watches a session with ten viewers on each studio until it
// ends: each studio's latencies.
func watchAll(b *testing.B, id string, on ...*studio) [][]time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	out := make([][]time.Duration, len(on))
	var wg sync.WaitGroup
	for i := range 10 * len(on) {
		wg.Go(func() {
			ds, err := latencies(ctx, on[i%len(on)].liveURL(id, 0))
			if err != nil {
				b.Error(err)
			}
			mu.Lock()
			out[i%len(on)] = append(out[i%len(on)], ds...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func p99(ds []time.Duration) time.Duration { return pct(ds, 99) }

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)*p/100]
}

// latencies watches a session until it ends: for each event that happened
// after the viewer connected, the time from the event to its arrival.
func latencies(ctx context.Context, url string) ([]time.Duration, error) {
	conn, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 24)
	connected := time.Now()
	var out []time.Duration
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return out, err
		}
		now := time.Now()
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			var ev struct {
				Seq  int64     `json:"seq"`
				Type string    `json:"type"`
				At   time.Time `json:"at"`
			}
			if err := json.Unmarshal(line, &ev); err != nil {
				return out, err
			}
			if ev.Seq > 0 && ev.At.After(connected) {
				out = append(out, now.Sub(ev.At))
			}
			if ev.Type == "session.finished" {
				return out, nil
			}
		}
	}
}
