package otlp

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/delegationstudio/studio/internal/trace"
)

// Export is the OTLP/JSON document of a trace in memory, with the default
// options: WriteJSON of trace.SourceOf(t).
func Export(t *trace.Trace) ([]byte, error) {
	if t == nil {
		return nil, errNoSource
	}
	var b bytes.Buffer
	if _, err := WriteJSON(&b, trace.SourceOf(t), Options{}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// WriteJSON writes a session's spans to w as one OTLP/JSON document (an
// ExportTraceServiceRequest: {"resourceSpans":[…]}), each span as soon as it
// is complete.
func WriteJSON(w io.Writer, src Source, opts Options) (Summary, error) {
	if src == nil {
		return Summary{}, errNoSource
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	b := appendDocumentHead(nil, producerOf(src.Head()))
	if _, err := bw.Write(b); err != nil {
		return Summary{}, err
	}
	n := 0
	sum, err := Spans(src, opts, func(s *tracepb.Span) error {
		b = b[:0]
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendSpan(b, s)
		_, err := bw.Write(b)
		if cap(b) > 1<<20 {
			b = nil // a span that held a large file: keep its buffer no longer
		}
		return err
	})
	if err != nil {
		return sum, err
	}
	if _, err := bw.WriteString(documentTail + "\n"); err != nil {
		return sum, err
	}
	return sum, bw.Flush()
}

// protoChunkSpans is how many spans WriteProto encodes at a time.
const protoChunkSpans = 256

// WriteProto writes a session's spans to w in OTLP's protobuf encoding: a
// TracesData message, which is wire-compatible with the
// ExportTraceServiceRequest an OTLP/HTTP receiver takes. It is written in
// chunks, each a TracesData of its own; protobuf concatenates repeated
// fields, so the file is one message whose resourceSpans are the chunks.
func WriteProto(w io.Writer, src Source, opts Options) (Summary, error) {
	if src == nil {
		return Summary{}, errNoSource
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	res := producerOf(src.Head())
	var batch []*tracepb.Span
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		b, err := proto.Marshal(tracesData(res, batch))
		if err != nil {
			return err
		}
		batch = batch[:0]
		_, err = bw.Write(b)
		return err
	}
	sum, err := Spans(src, opts, func(s *tracepb.Span) error {
		batch = append(batch, s)
		if len(batch) >= protoChunkSpans {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return sum, err
	}
	return sum, bw.Flush()
}

func tracesData(pr producer, spans []*tracepb.Span) *tracepb.TracesData {
	return &tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   pr.res,
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: pr.scope, Spans: spans}},
	}}}
}

// appendDocumentHead begins an OTLP/JSON document of one resource and one
// scope, up to its spans; documentTail ends it after them.
func appendDocumentHead(b []byte, pr producer) []byte {
	b = append(b, `{"resourceSpans":[{"resource":`...)
	b = appendResource(b, pr.res)
	b = append(b, `,"scopeSpans":[{"scope":`...)
	b = appendScope(b, pr.scope)
	return append(b, `,"spans":[`...)
}

const documentTail = "]}]}]}"

// jsonDocument encodes spans as one OTLP/JSON document.
func jsonDocument(pr producer, spans []*tracepb.Span) []byte {
	b := appendDocumentHead(nil, pr)
	for i, s := range spans {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSpan(b, s)
	}
	return append(b, documentTail...)
}

// The OTLP/JSON encoding (opentelemetry-proto, docs/specification.md): the
// protobuf JSON mapping with lowerCamelCase keys, 64-bit integers as decimal
// strings and enums as numbers, except that trace and span ids are hex, not
// base64. protojson cannot write the ids so; the rest is this short walk
// over the proto types.

func appendResource(b []byte, r *resourcepb.Resource) []byte {
	b = append(b, `{"attributes":`...)
	b = appendAttributes(b, r.GetAttributes())
	return append(b, '}')
}

func appendScope(b []byte, s *commonpb.InstrumentationScope) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, s.GetName())
	b = append(b, `,"version":`...)
	b = appendString(b, s.GetVersion())
	return append(b, '}')
}

func appendSpan(b []byte, s *tracepb.Span) []byte {
	b = append(b, `{"traceId":"`...)
	b = hex.AppendEncode(b, s.TraceId)
	b = append(b, `","spanId":"`...)
	b = hex.AppendEncode(b, s.SpanId)
	b = append(b, '"')
	if len(s.ParentSpanId) > 0 {
		b = append(b, `,"parentSpanId":"`...)
		b = hex.AppendEncode(b, s.ParentSpanId)
		b = append(b, '"')
	}
	b = append(b, `,"name":`...)
	b = appendString(b, s.Name)
	b = append(b, `,"kind":`...)
	b = strconv.AppendInt(b, int64(s.Kind), 10)
	b = append(b, `,"startTimeUnixNano":"`...)
	b = strconv.AppendUint(b, s.StartTimeUnixNano, 10)
	b = append(b, `","endTimeUnixNano":"`...)
	b = strconv.AppendUint(b, s.EndTimeUnixNano, 10)
	b = append(b, `","attributes":`...)
	b = appendAttributes(b, s.Attributes)
	if len(s.Events) > 0 {
		b = append(b, `,"events":[`...)
		for i, ev := range s.Events {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"timeUnixNano":"`...)
			b = strconv.AppendUint(b, ev.TimeUnixNano, 10)
			b = append(b, `","name":`...)
			b = appendString(b, ev.Name)
			b = append(b, `,"attributes":`...)
			b = appendAttributes(b, ev.Attributes)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if st := s.Status; st != nil {
		b = append(b, `,"status":{"code":`...)
		b = strconv.AppendInt(b, int64(st.Code), 10)
		if st.Message != "" {
			b = append(b, `,"message":`...)
			b = appendString(b, st.Message)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendAttributes(b []byte, kvs []*commonpb.KeyValue) []byte {
	b = append(b, '[')
	for i, kv := range kvs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendString(b, kv.Key)
		b = append(b, `,"value":`...)
		b = appendValue(b, kv.Value)
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendValue(b []byte, v *commonpb.AnyValue) []byte {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		b = append(b, `{"stringValue":`...)
		b = appendString(b, x.StringValue)
	case *commonpb.AnyValue_BoolValue:
		b = append(b, `{"boolValue":`...)
		b = strconv.AppendBool(b, x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		b = append(b, `{"intValue":"`...)
		b = strconv.AppendInt(b, x.IntValue, 10)
		b = append(b, '"')
	case *commonpb.AnyValue_DoubleValue:
		b = append(b, `{"doubleValue":`...)
		switch f := x.DoubleValue; {
		case math.IsNaN(f):
			b = append(b, `"NaN"`...)
		case math.IsInf(f, 1):
			b = append(b, `"Infinity"`...)
		case math.IsInf(f, -1):
			b = append(b, `"-Infinity"`...)
		default:
			b = strconv.AppendFloat(b, f, 'g', -1, 64)
		}
	case *commonpb.AnyValue_ArrayValue:
		b = append(b, `{"arrayValue":{"values":[`...)
		for i, e := range x.ArrayValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e)
		}
		b = append(b, "]}"...)
	default:
		return append(b, "{}"...)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string, as encoding/json does but without
// escaping HTML, so message text stays readable: invalid UTF-8 becomes
// U+FFFD, and U+2028 and U+2029 are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
