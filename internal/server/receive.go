package server

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/observed"
)

// Defaults of how a received trace ends (docs/ingest.md): the
// receiver's, internal/observed.
const (
	DefaultQuiet     = observed.DefaultQuiet
	DefaultGrace     = observed.DefaultGrace
	DefaultMaxTraces = observed.DefaultMaxTraces
)

// newReceiver makes the OTLP receiver: the traces' lifecycle is
// internal/observed's; the server decodes what arrives and hands it over.
func newReceiver(s *Server) *observed.Receiver {
	return observed.NewReceiver(observed.ReceiverConfig{Store: observedStore{s}, TaskTool: s.cfg.TaskTool,
		Quiet: s.cfg.OTLPQuiet, Grace: s.cfg.OTLPGrace, MaxTraces: s.cfg.OTLPMaxTraces, Closed: db.ReasonStopped,
		Now: s.now, Logger: s.log})
}

// apiReceiveTraces is POST /v1/traces, OTLP/HTTP: protobuf or JSON, gzip or
// not. It answers ExportTraceServiceResponse in the request's encoding,
// with a partial success when some spans could not be used.
func (s *Server) apiReceiveTraces(c echo.Context) error {
	req := c.Request()
	mt, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	asJSON := mt == echo.MIMEApplicationJSON
	if !asJSON && mt != "application/x-protobuf" && mt != "application/protobuf" {
		return otlpError(c, false, http.StatusUnsupportedMediaType,
			"send OTLP as application/x-protobuf or application/json, not "+orQuote(mt))
	}
	body, status, err := readOTLPBody(req)
	if err != nil {
		return otlpError(c, asJSON, status, err.Error())
	}
	decode := ingest.DecodeProto
	if asJSON {
		decode = ingest.DecodeJSON
	}
	traces, err := decode(body)
	if err != nil {
		return otlpError(c, asJSON, http.StatusBadRequest, err.Error())
	}
	batch := ingest.Group(traces)
	rejected, reasons := batch.Rejected, batch.Reasons
	dups, example := 0, ""
	for _, id := range batch.Order {
		n, first, err := s.receiver.Add(c.Request().Context(), id, batch.Traces[id])
		if err != nil {
			if errors.Is(err, observed.ErrClosed) {
				return otlpError(c, asJSON, http.StatusServiceUnavailable, "the studio is stopping; send these spans again to the next one")
			}
			return err
		}
		if n > 0 && dups == 0 {
			example = fmt.Sprintf("%q, span id %s of trace %s", first.Name, first.ID, id)
		}
		dups += n
	}
	if dups > 0 {
		rejected += dups
		reasons = append(reasons, fmt.Sprintf("%d spans had a span id this trace already had (the first: %s) and were left out, the first one kept: "+
			"an exporter's retry is harmless; otherwise give each span an id of its own", dups, example))
	}
	return otlpResponse(c, asJSON, rejected, strings.Join(reasons, "; "))
}

func orQuote(s string) string {
	if s == "" {
		return "no Content-Type"
	}
	return fmt.Sprintf("%q", s)
}

// readOTLPBody reads a request body, gunzipping it when it says so, and
// refuses one past MaxOTLPBody either way.
func readOTLPBody(req *http.Request) ([]byte, int, error) {
	var r io.Reader = req.Body
	switch enc := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("the body says Content-Encoding: gzip but is not gzip: %v", err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("Content-Encoding %q is not supported: send gzip or nothing", enc)
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxOTLPBody+1))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("the request is larger than the studio takes; send smaller batches")
		}
		return nil, http.StatusBadRequest, fmt.Errorf("cannot read the body: %v", err)
	}
	if len(b) > MaxOTLPBody {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("the request is over %d MiB once decompressed, the most /v1/traces takes; send smaller batches (the exporters' default of 512 spans is far below it)", MaxOTLPBody>>20)
	}
	return b, 0, nil
}

// otlpResponse writes ExportTraceServiceResponse: empty when every span was
// used, else partial_success with how many were rejected and why.
func otlpResponse(c echo.Context, asJSON bool, rejected int, reason string) error {
	if asJSON {
		var out struct {
			PartialSuccess *struct {
				RejectedSpans string `json:"rejectedSpans,omitempty"`
				ErrorMessage  string `json:"errorMessage,omitempty"`
			} `json:"partialSuccess,omitempty"`
		}
		if rejected > 0 || reason != "" {
			out.PartialSuccess = &struct {
				RejectedSpans string `json:"rejectedSpans,omitempty"`
				ErrorMessage  string `json:"errorMessage,omitempty"`
			}{RejectedSpans: fmt.Sprint(rejected), ErrorMessage: reason}
		}
		return c.JSON(http.StatusOK, out)
	}
	// ExportTraceServiceResponse { ExportTracePartialSuccess partial_success = 1; }
	// ExportTracePartialSuccess { int64 rejected_spans = 1; string error_message = 2; }
	var b []byte
	if rejected > 0 || reason != "" {
		var ps []byte
		if rejected > 0 {
			ps = protowire.AppendTag(ps, 1, protowire.VarintType)
			ps = protowire.AppendVarint(ps, uint64(rejected))
		}
		if reason != "" {
			ps = protowire.AppendTag(ps, 2, protowire.BytesType)
			ps = protowire.AppendString(ps, reason)
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, ps)
	}
	return c.Blob(http.StatusOK, "application/x-protobuf", b)
}

// otlpError answers as OTLP/HTTP asks: a google.rpc.Status in the request's
// encoding (code 3, INVALID_ARGUMENT, for bad input), which in JSON also
// carries the studio's usual "error".
func otlpError(c echo.Context, asJSON bool, status int, msg string) error {
	code := 3 // INVALID_ARGUMENT
	switch status {
	case http.StatusRequestEntityTooLarge:
		code = 8 // RESOURCE_EXHAUSTED
	case http.StatusServiceUnavailable:
		code = 14 // UNAVAILABLE
	case http.StatusUnauthorized:
		code = 16 // UNAUTHENTICATED
	}
	if asJSON {
		return c.JSON(status, map[string]any{"code": code, "message": msg, "error": msg})
	}
	// google.rpc.Status { int32 code = 1; string message = 2; }
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(code))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, msg)
	return c.Blob(status, "application/x-protobuf", b)
}
