package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/view"
)

// receivingStudio is a studio with its own receiver settings.
func receivingStudio(t *testing.T, cfg Config) *studio {
	t.Helper()
	s := startStudioWith(t, cfg)
	s.t = t
	return s
}

// recorded is the real deepagents run of e2e/otlp/deepagents.mjs, as its
// exporter sent it: one ExportTraceServiceRequest in protobuf.
func recorded(t *testing.T) ptrace.Traces {
	t.Helper()
	raw, err := os.ReadFile("../ingest/testdata/deepagents.otlp.pb")
	if err != nil {
		t.Fatal(err)
	}
	td, err := ingest.DecodeProto(raw)
	if err != nil {
		t.Fatal(err)
	}
	return td
}

// oneByOne splits a request into one request per span, in the order the
// spans ended: what a simple span processor sends.
func oneByOne(td ptrace.Traces) [][]byte {
	type item struct {
		end  int64
		body []byte
	}
	var items []item
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				one := ptrace.NewTraces()
				rs := one.ResourceSpans().AppendEmpty()
				rss.At(i).Resource().CopyTo(rs.Resource())
				ss := rs.ScopeSpans().AppendEmpty()
				sss.At(j).Scope().CopyTo(ss.Scope())
				spans.At(k).CopyTo(ss.Spans().AppendEmpty())
				b, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(one)
				items = append(items, item{int64(spans.At(k).EndTimestamp()), b})
			}
		}
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].end < items[j].end })
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = it.body
	}
	return out
}

func (s *studio) otlp(contentType, encoding string, body []byte, token string) (*http.Response, []byte) {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.ts.URL+"/v1/traces", bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return res, b.Bytes()
}

// onlySession is the one stored session.
func (s *studio) onlySession() *db.Session {
	s.t.Helper()
	list, err := s.db.Sessions(context.Background(), 0)
	if err != nil || len(list) != 1 {
		s.t.Fatalf("sessions: %v, %v", list, err)
	}
	return &list[0]
}

func (s *studio) agents(id string) []string {
	s.t.Helper()
	tr, err := s.db.Trace(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, a := range tr.Agents {
		mode := ""
		if a.Mode != nil {
			mode = " " + *a.Mode
		}
		out = append(out, a.Name+mode)
	}
	return out
}

func TestReceiveOTLP(t *testing.T) {
	td := recorded(t)
	pb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	js, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)

	t.Run("protobuf: an ExportTraceServiceResponse, and the session", func(t *testing.T) {
		s := receivingStudio(t, Config{})
		res, body := s.otlp("application/x-protobuf", "", pb, "")
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Fatalf("status %d, %s: %s", res.StatusCode, res.Header.Get("Content-Type"), body)
		}
		resp := ptraceotlp.NewExportResponse()
		if err := resp.UnmarshalProto(body); err != nil || resp.PartialSuccess().RejectedSpans() != 0 {
			t.Fatalf("response %x: %v", body, err)
		}
		sess := s.onlySession()
		s.waitDone(sess.ID)
		if got := strings.Join(s.agents(sess.ID), ", "); got != "main, general-purpose isolated, forker fork" {
			t.Errorf("agents: %s", got)
		}
		_, page := s.get("/sessions/" + sess.ID)
		origin := page.Find(`[data-testid="origin"]`).Text()
		for _, want := range []string{"deepagents-order-number", "OpenInference", "@arizeai/openinference-instrumentation-langchain 4.1.1", "opentelemetry nodejs"} {
			if !strings.Contains(origin, want) {
				t.Errorf("origin %q lacks %q", origin, want)
			}
		}
		if n := page.Find(`[data-testid="span"]`).Length(); n != 29 {
			t.Errorf("%d kept spans listed, want 29", n)
		}
		if page.Find(`[data-testid="clone-team"]`).Length() != 0 {
			t.Error("a received session has no scenario to clone")
		}
		if got := page.Find(`[data-testid="status"]`).Text(); got != "done" {
			t.Errorf("status %q", got)
		}
		t.Run("exports work on it: the trace re-imports, the OTLP export decodes", func(t *testing.T) {
			res, tr := s.api("GET", "/api/sessions/"+sess.ID+"/trace", "", nil)
			if res.StatusCode != 200 {
				t.Fatalf("trace: %d", res.StatusCode)
			}
			res, body := s.api("POST", "/api/traces", "application/json", tr)
			if res.StatusCode != 201 {
				t.Fatalf("re-import: %d %s", res.StatusCode, body)
			}
			res, doc := s.api("GET", "/api/sessions/"+sess.ID+"/otlp", "", nil)
			if res.StatusCode != 200 {
				t.Fatalf("otlp: %d", res.StatusCode)
			}
			if td, err := ingest.DecodeJSON(doc); err != nil || td.SpanCount() == 0 {
				t.Fatalf("the OTLP export: %v", err)
			}
		})
		t.Run("notes and the call page", func(t *testing.T) {
			tr, err := s.db.Trace(context.Background(), sess.ID)
			if err != nil {
				t.Fatal(err)
			}
			// Its notes are the fold's, as a page shows them.
			if _, err := view.FromTrace(tr, view.BudgetOf(tr.Scenario)); err != nil {
				t.Errorf("the received session's log does not fold: %v", err)
			}
			if res, _ := s.get("/sessions/" + sess.ID + "/calls/" + tr.ModelCalls[0].ID); res.StatusCode != 200 {
				t.Errorf("call page: %d", res.StatusCode)
			}
		})
	})

	t.Run("JSON, gzipped", func(t *testing.T) {
		s := receivingStudio(t, Config{})
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write(js)
		_ = zw.Close()
		res, body := s.otlp("application/json", "gzip", z.Bytes(), "")
		if res.StatusCode != 200 || strings.TrimSpace(string(body)) != "{}" {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
		s.waitDone(s.onlySession().ID)
	})

	t.Run("live: spans one by one, the tree grows on the websocket", func(t *testing.T) {
		s := receivingStudio(t, Config{})
		reqs := oneByOne(td)
		s.otlp("application/x-protobuf", "", reqs[0], "")
		sess := s.onlySession()
		if sess.Status != delegation.StatusRunning || !s.srv.Runner().Running(sess.ID) {
			t.Fatalf("after the first span: %s", sess.Status)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.ts.URL, "http")+"/api/sessions/"+sess.ID+"/live?after=0", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		conn.SetReadLimit(1 << 24) // a batch, with its patches, is one message
		go func() {
			for _, r := range reqs[1:] {
				req, _ := http.NewRequest("POST", s.ts.URL+"/v1/traces", bytes.NewReader(r))
				req.Header.Set("Content-Type", "application/x-protobuf")
				if res, err := http.DefaultClient.Do(req); err == nil {
					res.Body.Close()
				}
			}
		}()
		var types []string
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("after %v: %v", types, err)
			}
			finished := false
			for line := range bytes.SplitSeq(data, []byte("\n")) { // one event a line
				var ev wireEvent
				_ = json.Unmarshal(line, &ev)
				types = append(types, ev.Type)
				finished = finished || ev.Type == string(delegation.EventSessionFinished)
			}
			if finished {
				break
			}
		}
		if n := strings.Count(strings.Join(types, " "), "agent.started"); n != 3 {
			t.Errorf("%d agents started live: %v", n, types)
		}
		s.waitDone(sess.ID)
	})
}

func TestReceiveBadInput(t *testing.T) {
	s := receivingStudio(t, Config{})
	status := func(body []byte) (int, string) {
		var code uint64
		var msg string
		for len(body) > 0 {
			num, typ, n := protowire.ConsumeTag(body)
			body = body[n:]
			switch {
			case num == 1 && typ == protowire.VarintType:
				code, n = protowire.ConsumeVarint(body)
			case num == 2 && typ == protowire.BytesType:
				var b []byte
				b, n = protowire.ConsumeBytes(body)
				msg = string(b)
			default:
				n = protowire.ConsumeFieldValue(num, typ, body)
			}
			if n < 0 {
				return -1, ""
			}
			body = body[n:]
		}
		return int(code), msg
	}
	t.Run("malformed protobuf: 400 with a google.rpc.Status", func(t *testing.T) {
		res, body := s.otlp("application/x-protobuf", "", []byte{0x0a, 0xff, 0x01}, "")
		code, msg := status(body)
		if res.StatusCode != 400 || code != 3 || !strings.Contains(msg, "protobuf") {
			t.Fatalf("%d: code %d %q", res.StatusCode, code, msg)
		}
	})
	t.Run("malformed JSON: 400 with the reason", func(t *testing.T) {
		res, body := s.otlp("application/json", "", []byte(`{"resourceSpans": [{"scopeSpans": 7}]}`), "")
		var e struct {
			Code  int    `json:"code"`
			Error string `json:"error"`
		}
		if res.StatusCode != 400 || json.Unmarshal(body, &e) != nil || e.Code != 3 || !strings.Contains(e.Error, "JSON") {
			t.Fatalf("%d: %s", res.StatusCode, body)
		}
	})
	t.Run("not gzip though it says so", func(t *testing.T) {
		if res, body := s.otlp("application/json", "gzip", []byte(`{}`), ""); res.StatusCode != 400 || !strings.Contains(string(body), "gzip") {
			t.Fatalf("%d: %s", res.StatusCode, body)
		}
	})
	t.Run("another content type: 415", func(t *testing.T) {
		if res, body := s.otlp("text/plain", "", []byte(`x`), ""); res.StatusCode != 415 || !strings.Contains(string(body), "application/x-protobuf") {
			t.Fatalf("%d: %s", res.StatusCode, body)
		}
	})
	t.Run("oversized: 413, compressed or not", func(t *testing.T) {
		big := bytes.Repeat([]byte{' '}, MaxTraceBody+10)
		if res, _ := s.otlp("application/json", "", big, ""); res.StatusCode != 413 {
			t.Fatalf("plain: %d", res.StatusCode)
		}
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write(big)
		_ = zw.Close()
		res, body := s.otlp("application/json", "gzip", z.Bytes(), "")
		if res.StatusCode != 413 || !strings.Contains(string(body), "16 MiB") {
			t.Fatalf("gzip bomb: %d: %s", res.StatusCode, body)
		}
	})
	t.Run("a span without ids: partial success, the rest kept", func(t *testing.T) {
		td := ptrace.NewTraces()
		spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		spans.AppendEmpty().SetName("no ids")
		b, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		res, body := s.otlp("application/x-protobuf", "", b, "")
		resp := ptraceotlp.NewExportResponse()
		if res.StatusCode != 200 || resp.UnmarshalProto(body) != nil || resp.PartialSuccess().RejectedSpans() != 1 ||
			!strings.Contains(resp.PartialSuccess().ErrorMessage(), "no trace id") {
			t.Fatalf("%d: %x", res.StatusCode, body)
		}
	})
	list, _ := s.db.Sessions(context.Background(), 0)
	if len(list) != 0 {
		t.Errorf("bad input wrote %d sessions", len(list))
	}
}

func TestReceiveNeedsTheToken(t *testing.T) {
	s := receivingStudio(t, Config{Token: "s3cret"})
	pb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(recorded(t))
	if res, _ := s.otlp("application/x-protobuf", "", pb, ""); res.StatusCode != 401 {
		t.Fatalf("without the token: %d", res.StatusCode)
	}
	if res, body := s.otlp("application/x-protobuf", "", pb, "s3cret"); res.StatusCode != 200 {
		t.Fatalf("with it: %d %s", res.StatusCode, body)
	}
}

func TestReceivedTraceEnds(t *testing.T) {
	td := recorded(t)
	reqs := oneByOne(td)
	t.Run("silent for the quiet period: interrupted; late spans get a session of their own", func(t *testing.T) {
		s := receivingStudio(t, Config{OTLPQuiet: time.Hour, OTLPGrace: time.Hour})
		for _, r := range reqs[:10] {
			s.otlp("application/x-protobuf", "", r, "")
		}
		id := s.onlySession().ID
		s.srv.receiver.Sweep(time.Now().Add(time.Hour + time.Second))
		s.waitDone(id)
		sess, _ := s.db.Session(context.Background(), id)
		if sess.Status != delegation.StatusInterrupted || !strings.Contains(sess.Error, "no span of this trace arrived for 1h0m0s") {
			t.Fatalf("%s: %s", sess.Status, sess.Error)
		}
		for _, r := range reqs[10:] {
			s.otlp("application/x-protobuf", "", r, "")
		}
		list, _ := s.db.Sessions(context.Background(), 0)
		if len(list) != 2 {
			t.Fatalf("%d sessions", len(list))
		}
	})
	t.Run("a missing parent: waited for, then the rest shown as orphans", func(t *testing.T) {
		s := receivingStudio(t, Config{OTLPQuiet: time.Hour, OTLPGrace: time.Hour})
		// Leave out one model_request span: its model call and lambda lose
		// their parent.
		cut := ptrace.NewTraces()
		td.CopyTo(cut)
		dropped := false
		for i := 0; i < cut.ResourceSpans().Len(); i++ {
			sss := cut.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				sss.At(j).Spans().RemoveIf(func(sp ptrace.Span) bool {
					if !dropped && sp.Name() == "model_request" {
						dropped = true
						return true
					}
					return false
				})
			}
		}
		b, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(cut)
		s.otlp("application/x-protobuf", "", b, "")
		id := s.onlySession().ID
		if sess, _ := s.db.Session(context.Background(), id); sess.Status != delegation.StatusRunning {
			t.Fatalf("the root is in but a parent is missing: still waiting, not %s", sess.Status)
		}
		s.srv.receiver.Sweep(time.Now().Add(time.Hour + time.Second))
		s.waitDone(id)
		sess, _ := s.db.Session(context.Background(), id)
		_, page := s.get("/sessions/" + id)
		if sess.Status != delegation.StatusDone || page.Find(`[data-testid="span"] .error:contains("orphan")`).Length() != 1 {
			t.Fatalf("%s; orphans listed: %d", sess.Status, page.Find(`[data-testid="span"] .error`).Length())
		}
		if got := strings.Join(s.agents(id), ", "); got != "main, general-purpose isolated, forker fork" {
			t.Errorf("agents: %s", got)
		}
	})
	t.Run("the studio stops: interrupted", func(t *testing.T) {
		s := receivingStudio(t, Config{})
		for _, r := range reqs[:10] {
			s.otlp("application/x-protobuf", "", r, "")
		}
		id := s.onlySession().ID
		s.srv.Shutdown(context.Background())
		sess, _ := s.db.Session(context.Background(), id)
		if sess.Status != delegation.StatusInterrupted {
			t.Fatalf("%s", sess.Status)
		}
		// It carries why as a code, which the page words.
		if _, page := s.get("/sessions/" + id); !strings.Contains(page.Find(`[data-testid="session-error"]`).Text(), "the studio was stopping") {
			t.Errorf("the page says %q", page.Find(`[data-testid="session-error"]`).Text())
		}
		if res, _ := s.otlp("application/x-protobuf", "", reqs[10], ""); res.StatusCode != 503 {
			t.Errorf("after shutdown: %d", res.StatusCode)
		}
	})
}

// openTrace is one OTLP request holding a single span whose parent never
// comes: a trace that stays open until the studio ends it.
func openTrace(t *testing.T, n, spanN int) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "open")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{0xaa, byte(n >> 8), byte(n), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	sp.SetSpanID(pcommon.SpanID{1, byte(n >> 8), byte(n), byte(spanN), 1, 1, 1, 1})
	sp.SetParentSpanID(pcommon.SpanID{9, 9, 9, 9, 9, 9, 9, 9})
	sp.SetName("step")
	at := time.Now()
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Millisecond)))
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenTracesDoNotStarveRuns(t *testing.T) {
	t.Run("100 open traces beside the engine's cap: a Run still starts", func(t *testing.T) {
		s := receivingStudio(t, Config{OTLPQuiet: time.Hour, OTLPGrace: time.Hour})
		for i := range 100 {
			if res, body := s.otlp("application/x-protobuf", "", openTrace(t, i, 0), ""); res.StatusCode != http.StatusOK {
				t.Fatalf("trace %d: %d %s", i, res.StatusCode, body)
			}
		}
		list, _ := s.db.Sessions(context.Background(), 0)
		if len(list) != 100 {
			t.Fatalf("%d sessions, want 100 open traces", len(list))
		}
		doc, err := os.ReadFile("../../examples/order-number.json")
		if err != nil {
			t.Fatal(err)
		}
		res, body := s.api("POST", "/api/sessions", "application/json", doc)
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("a Run beside 100 open traces (cap %d): %d %s", DefaultMaxRunning, res.StatusCode, body)
		}
	})
	t.Run("past the receiver's cap, the quietest trace ends first", func(t *testing.T) {
		now := time.Now()
		var mu sync.Mutex
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now }
		s := receivingStudio(t, Config{OTLPQuiet: time.Hour, OTLPGrace: time.Hour, OTLPMaxTraces: 3, Now: clock})
		send := func(n, span int) {
			t.Helper()
			if res, body := s.otlp("application/x-protobuf", "", openTrace(t, n, span), ""); res.StatusCode != http.StatusOK {
				t.Fatalf("trace %d: %d %s", n, res.StatusCode, body)
			}
		}
		// open sends a new trace's first span and returns its session.
		seen := map[string]bool{}
		open := func(n int) string {
			t.Helper()
			send(n, 0)
			list, _ := s.db.Sessions(context.Background(), 0)
			id := ""
			for _, sess := range list {
				if !seen[sess.ID] {
					seen[sess.ID], id = true, sess.ID
				}
			}
			return id
		}
		ids := []string{open(0), open(1), open(2)}
		send(0, 1) // trace 0 is no longer the quietest: trace 1 is
		ids = append(ids, open(3))
		s.waitDone(ids[1])
		sess, _ := s.db.Session(context.Background(), ids[1])
		if sess.Status != delegation.StatusInterrupted || !strings.Contains(sess.Error, "receiving 3 traces at once") ||
			!strings.Contains(sess.Error, "quiet longest") {
			t.Fatalf("the quietest trace: %s: %q", sess.Status, sess.Error)
		}
		for _, i := range []int{0, 2, 3} {
			if sess, _ := s.db.Session(context.Background(), ids[i]); sess.Status != delegation.StatusRunning || !s.srv.Runner().Running(ids[i]) {
				t.Errorf("trace %d: %s, want still running", i, sess.Status)
			}
		}
		// A late span of the ended trace starts a session of its own, which
		// makes room in turn: trace 2 is now the quietest.
		send(1, 1)
		s.waitDone(ids[2])
	})
}

func TestReceivePartialSuccessSaysWhatWasLeftOut(t *testing.T) {
	s := receivingStudio(t, Config{OTLPQuiet: time.Hour, OTLPGrace: time.Hour})
	answer := func(t *testing.T, body []byte) (int64, string) {
		t.Helper()
		res, reply := s.otlp("application/x-protobuf", "", body, "")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", res.StatusCode, reply)
		}
		resp := ptraceotlp.NewExportResponse()
		if err := resp.UnmarshalProto(reply); err != nil {
			t.Fatal(err)
		}
		return resp.PartialSuccess().RejectedSpans(), resp.PartialSuccess().ErrorMessage()
	}
	// timed is openTrace's span with the times given.
	timed := func(t *testing.T, n int, start, end uint64) []byte {
		td, err := ingest.DecodeProto(openTrace(t, n, 0))
		if err != nil {
			t.Fatal(err)
		}
		sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		sp.SetStartTimestamp(pcommon.Timestamp(start))
		sp.SetEndTimestamp(pcommon.Timestamp(end))
		b, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		return b
	}
	t.Run("a span id seen twice is taken once, and said", func(t *testing.T) {
		if n, msg := answer(t, openTrace(t, 1, 0)); n != 0 || msg != "" {
			t.Fatalf("first: %d %q", n, msg)
		}
		n, msg := answer(t, openTrace(t, 1, 0))
		if n != 1 || !strings.Contains(msg, "1 spans had a span id this trace already had") || !strings.Contains(msg, `"step"`) {
			t.Fatalf("the same span again: rejected %d, %q", n, msg)
		}
	})
	now := uint64(time.Now().UnixNano())
	for _, c := range []struct {
		name       string
		start, end uint64
		rejected   int64
		want       string
	}{
		{"a start of 0 is taken as the end", 0, now, 0, "start time 0 is not a time"},
		{"an end of 2^63 is taken as the start", now, 1 << 63, 0, "end time 9223372036854775808 is not a time"},
		{"no time at all: refused", 0, 1 << 63, 1, "has no usable time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, msg := answer(t, timed(t, 10+int(c.rejected)+len(c.want), c.start, c.end))
			if n != c.rejected || !strings.Contains(msg, c.want) {
				t.Fatalf("rejected %d, %q; want %d and %q", n, msg, c.rejected, c.want)
			}
		})
	}
}
