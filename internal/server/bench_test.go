package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/benchdata"
	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// bigSession stores a session of about `messages` messages: a main agent's
// tool-call turns, then a fork child, so the page has a delegation to show.
func bigSession(b *testing.B, d *db.DB, srv *Server, messages int) string {
	b.Helper()
	sc, err := scenario.Parse(benchdata.Messages(messages))
	if err != nil {
		b.Fatal(err)
	}
	id, res, err := srv.Runner().Run(context.Background(), sc)
	if err != nil || res.Status != delegation.StatusDone {
		b.Fatalf("run: %v %+v", err, res)
	}
	return id
}

func benchmarkSessionPage(b *testing.B, messages int) {
	d, err := db.Open(context.Background(), filepath.Join(b.TempDir(), "studio.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	srv := New(Config{DB: d})
	defer srv.Shutdown(context.Background())
	id := bigSession(b, d, srv, messages)
	h := srv.Handler()
	var size int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/sessions/"+id, nil))
		if rec.Code != 200 {
			b.Fatalf("status %d", rec.Code)
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
	b.ReportMetric(float64(size), "page-bytes")
}

// BenchmarkSessionPage10k: the server renders a 10,000-message session's
// page. Target: ≤ 300 ms.
func BenchmarkSessionPage10k(b *testing.B) { benchmarkSessionPage(b, 10_000) }

// BenchmarkEnginePersistedBroadcast is the 200 + 50 step scenario with every
// event stored and broadcast to a live viewer (patches rendered), per model
// call, compared with BenchmarkEngine200Plus50 in internal/session.
func BenchmarkEnginePersistedBroadcast(b *testing.B) {
	d, err := db.Open(context.Background(), filepath.Join(b.TempDir(), "studio.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	srv := New(Config{DB: d})
	defer srv.Shutdown(context.Background())
	sc := longScenario(b, 200, 50)
	sc.Counter.Count("warm up")
	n := 0
	srv.runner.NewID = func() string { n++; return fmt.Sprintf("bench-%d", n) }
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sub := srv.hub.Subscribe(fmt.Sprintf("bench-%d", n+1))
		done := make(chan int)
		go func() {
			got := 0
			for m := range sub.C() { // a batch of events, one a line
				got += bytes.Count(m.Data, []byte("\n")) + 1
			}
			done <- got
		}()
		_, res, err := srv.runner.Run(context.Background(), sc)
		if err != nil || res.Status != delegation.StatusDone {
			b.Fatalf("run: %v %+v", err, res)
		}
		sub.Close()
		if got := <-done; got < 1000 {
			b.Fatalf("the viewer got %d events", got)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*251), "ns/model-call")
}

func longScenario(tb testing.TB, mainSteps, childSteps int) *scenario.Scenario {
	tb.Helper()
	sc, err := scenario.Parse(benchdata.LongScenario(mainSteps, childSteps))
	if err != nil {
		tb.Fatal(err)
	}
	return sc
}

// BenchmarkBigDelegation: a fan-out of 50 children after 5,000 parent
// steps against one of 5, both stored: the tree's layout and the session
// page's server render, timed in turns (the median of each) so that load
// on the machine hits both alike; and the tree's SVG. Targets: the page of
// 50 ≤ 2× the page of 5; the layout's cost per box of 50 ≤ 2× that of 5
// (it is linear; ten times the boxes take about ten times as long); the
// tree's SVG of 50 ≤ 200 KB.
func BenchmarkBigDelegation(b *testing.B) {
	d, err := db.Open(context.Background(), filepath.Join(b.TempDir(), "studio.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	srv := New(Config{DB: d})
	defer srv.Shutdown(context.Background())
	run := func(children int) string {
		sc, err := scenario.Parse(benchdata.FanOut(5000, children))
		if err != nil {
			b.Fatal(err)
		}
		id, res, err := srv.Runner().Run(context.Background(), sc)
		if err != nil || res.Status != delegation.StatusDone {
			b.Fatalf("run: %v %+v", err, res)
		}
		return id
	}
	ids := [2]string{run(5), run(50)}
	h := srv.Handler()
	page := func(id string) (time.Duration, int) {
		start := time.Now()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/sessions/"+id, nil)
		req.Host = "127.0.0.1"
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("status %d", rec.Code)
		}
		return time.Since(start), rec.Body.Len()
	}
	var layouts [2]view.TreeLayout
	var trees [2]*view.Node
	for i, id := range ids {
		st, rd, err := srv.runner.View(context.Background(), id)
		if err != nil {
			b.Fatal(err)
		}
		rd.Close()
		trees[i] = st.Tree()
	}
	layout := func(i int) time.Duration {
		start := time.Now()
		for range 20 {
			layouts[i] = view.Layout(trees[i], view.LayoutOptions{Selected: "a1"})
		}
		return time.Since(start) / 20
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2])
	}
	var pages, lays [2][]time.Duration
	var sizes [2]int
	for b.Loop() {
		for range 7 {
			for i := range ids {
				t, n := page(ids[i])
				pages[i], sizes[i] = append(pages[i], t), n
				lays[i] = append(lays[i], layout(i))
			}
		}
	}
	var svg bytes.Buffer
	if err := templates.TreeSVG("s", layouts[1]).Render(context.Background(), &svg); err != nil {
		b.Fatal(err)
	}
	boxes := [2]float64{float64(len(layouts[0].Nodes)), float64(len(layouts[1].Nodes))}
	b.ReportMetric(median(pages[1])/median(pages[0]), "page-x50/5")
	b.ReportMetric(median(pages[1])/1e6, "ms-page-50")
	b.ReportMetric(float64(sizes[1])/float64(sizes[0]), "page-bytes-x50/5")
	b.ReportMetric(median(lays[1])/median(lays[0]), "layout-x50/5")
	b.ReportMetric((median(lays[1])/boxes[1])/(median(lays[0])/boxes[0]), "layout-per-box-x50/5")
	b.ReportMetric(float64(svg.Len())/1024, "tree-KB-50")
}

// Issue 28: a scenario of 200,000 unknown keys (2.2 MB) posted to
// /api/sessions took 5–7 s before its 400. It is timed beside a valid
// scenario of the same size (one long prompt, started as a session):
// "bomb-x" is how many times longer the bomb takes.
func BenchmarkUnknownKeyBombRequest(b *testing.B) {
	d, err := db.Open(context.Background(), filepath.Join(b.TempDir(), "studio.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	srv := New(Config{DB: d, Limits: Limits{MaxRunning: 1 << 20}})
	defer srv.Shutdown(context.Background())
	h := srv.Handler()
	var bomb bytes.Buffer
	bomb.WriteString(`{"name": "bomb", "prompt": "p", "script": {"main": [{"content": "a"}]}`)
	for i := 0; bomb.Len() < 2200<<10; i++ {
		fmt.Fprintf(&bomb, `, "k%05d": 1`, i)
	}
	bomb.WriteString("}")
	prompt := bytes.Repeat([]byte("word "), (bomb.Len()-70)/5)
	normal := []byte(`{"name": "big", "prompt": "` + string(prompt) + `", "script": {"main": [{"content": "a"}]}}`)
	post := func(doc []byte, want int) time.Duration {
		start := time.Now()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/api/sessions", bytes.NewReader(doc))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("status %d, want %d: %.300s", rec.Code, want, rec.Body.String())
		}
		return time.Since(start)
	}
	var tb, tn time.Duration
	for b.Loop() {
		tb += post(bomb.Bytes(), http.StatusBadRequest)
		tn += post(normal, http.StatusCreated)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tb.Milliseconds())/n, "ms-bomb")
	b.ReportMetric(float64(tn.Milliseconds())/n, "ms-normal")
	b.ReportMetric(float64(tb)/float64(tn), "bomb-x")
	b.ReportMetric(float64(bomb.Len()), "bytes")
}
