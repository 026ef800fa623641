package server

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkReplicaLatency: from the engine's event to a viewer of the
// session on the replica that runs it (the recorder publishes it) and on
// another replica (the store's NOTIFY, then a read of the table), both
// studios on one PostgreSQL database (STUDIO_TEST_POSTGRES). Reports each
// p99 and their ratio; the other replica's p99 is the notify-to-viewer
// figure of docs/postgres.md.
func BenchmarkReplicaLatency(b *testing.B) {
	for b.Loop() {
		rs := startReplicas(b, 2)
		a, o := rs[0], rs[1]
		const viewers = 10
		id := a.start(b, slowScenario(150, 10))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		var mu sync.Mutex
		lat := map[int][]time.Duration{}
		var wg sync.WaitGroup
		for i := range 2 * viewers {
			on := []*studio{a, o}[i%2]
			wg.Go(func() {
				ds, err := latencies(ctx, on.liveURL(id, 0))
				if err != nil {
					b.Error(err)
				}
				mu.Lock()
				lat[i%2] = append(lat[i%2], ds...)
				mu.Unlock()
			})
		}
		wg.Wait()
		cancel()
		pa, po := p99(lat[0]), p99(lat[1])
		b.ReportMetric(ms(pct(lat[0], 50)), "p50-ms-running-replica")
		b.ReportMetric(ms(pct(lat[1], 50)), "p50-ms-other-replica")
		b.ReportMetric(ms(pa), "p99-ms-running-replica")
		b.ReportMetric(ms(po), "p99-ms-other-replica")
		b.ReportMetric(ms(po)/ms(pa), "other/running")
		b.ReportMetric(float64(len(lat[1])), "deliveries-other")
	}
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
