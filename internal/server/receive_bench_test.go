package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/delegationstudio/studio/internal/ingest"
)

// retraced is the recorded deepagents run under trace id n: each copy is a
// trace (a session) of its own.
func retraced(td ptrace.Traces, n uint64) ([]byte, int) {
	c := ptrace.NewTraces()
	td.CopyTo(c)
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[8:], n+1)
	spans := 0
	rss := c.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				ss.At(k).SetTraceID(id)
				spans++
			}
		}
	}
	b, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(c)
	return b, spans
}

// BenchmarkReceiveOTLP: the OTLP receiver's spans per CPU second, from the
// HTTP request to the stored session, for the real deepagents run's spans
// (one request per trace, as a batch processor sends them), beside the
// floor of only decoding the same requests; both in one run.
func BenchmarkReceiveOTLP(b *testing.B) {
	raw, err := os.ReadFile("../ingest/testdata/deepagents.otlp.pb")
	if err != nil {
		b.Fatal(err)
	}
	td, err := ingest.DecodeProto(raw)
	if err != nil {
		b.Fatal(err)
	}
	const traces = 40
	s := startStudioWith(b, Config{})
	var next uint64
	var ours, floor time.Duration
	spans := 0
	for i := 0; i < b.N; i++ {
		bodies := make([][]byte, traces)
		for t := range bodies {
			var n int
			bodies[t], n = retraced(td, next)
			next++
			spans += n
		}
		start := cpuTime()
		for _, body := range bodies {
			if _, err := ingest.DecodeProto(body); err != nil {
				b.Fatal(err)
			}
		}
		floor += cpuTime() - start
		start = cpuTime()
		for _, body := range bodies {
			req, _ := http.NewRequestWithContext(context.Background(), "POST", s.ts.URL+"/v1/traces", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-protobuf")
			res, err := s.c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var out bytes.Buffer
			_, _ = out.ReadFrom(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Fatalf("status %d: %s", res.StatusCode, out.String())
			}
		}
		ours += cpuTime() - start
	}
	b.ReportMetric(float64(spans)/ours.Seconds(), "spans/cpu-s")
	b.ReportMetric(float64(ours)/float64(floor), "ours/decode")
}
