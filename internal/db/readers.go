package db

import (
	"context"
	"iter"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// The two reads a store offers of one session, each one moment of it (one
// read transaction): a store's Read hands a Reader to its function, its
// ReadPage returns a PageReader. SQLite's are in cursor.go and views.go; a
// store of another engine returns its own.

// Reader reads a stored session part by part, each part a cursor over its
// rows, so an export streams a session of any size in the memory of a row
// and sees one consistent state while the session runs. It is a
// trace.Source, and has the session's log with what each event introduced
// (Log) and its message lists (Backward), which is what the OTLP export
// reads. It is valid only inside the function given to Read.
type Reader interface {
	trace.Source
	// Session is the session's row as the read began, without its scenario
	// (Head has it).
	Session() *Session
	// Log yields the session's log, each event as its step (trace.StepOf):
	// with what it introduced.
	Log() iter.Seq2[trace.Step, error]
	// Backward yields messages to-1 down to from of an agent's message
	// list, newest first.
	Backward(agentID string, from, to int) iter.Seq2[trace.Message, error]
}

// PageReader reads the rows a session's page shows, each by key, never the
// whole session (docs/live.md). Close it.
type PageReader interface {
	// Session is the session's row as the read began, but for its scenario.
	Session() *Session
	Close()
	// View is the session's stored page state and the seq it is at; nil
	// when there is none of this version.
	View(ctx context.Context, version int) ([]byte, int64, error)
	// Messages reads messages from … to-1 of an agent's list.
	Messages(ctx context.Context, agentID string, from, to int) ([]Message, error)
	// MessageAt reads message idx of an agent's list; nil when there is none.
	MessageAt(ctx context.Context, agentID string, idx int) (*Message, error)
	// MessageByID reads a message by its id; nil when there is none.
	MessageByID(ctx context.Context, id string) (*Message, error)
	// CallsHead reads the session's first model calls, at most limit.
	CallsHead(ctx context.Context, limit int) ([]CallRow, error)
	// CallsTail reads the session's last model calls, at most limit, in
	// order; total is the number of calls, for their steps.
	CallsTail(ctx context.Context, limit, total int) ([]CallRow, error)
	// CallsFrom reads the calls of steps from … to-1 (from 1), in order.
	CallsFrom(ctx context.Context, from, to int) ([]CallRow, error)
	// Call reads a model call by id; nil when there is none. Its step is
	// not read (0).
	Call(ctx context.Context, id string) (*CallRow, error)
	// FirstCall reads an agent's first model call; nil when it made none.
	FirstCall(ctx context.Context, agentID string) (*CallRow, error)
	// LatestCall reads an agent's latest model call at or before a seq;
	// nil when it had made none.
	LatestCall(ctx context.Context, agentID string, seq int64) (*CallRow, error)
	// Files reads main's files after a path (in path order), at most
	// limit, each with the first previewBytes of its content.
	Files(ctx context.Context, after string, limit, previewBytes int) ([]File, error)
	// FilesAt reads the named files of main, those that exist.
	FilesAt(ctx context.Context, paths []string, previewBytes int) (map[string]File, error)
	// FileContent reads one of main's files whole; ok is false when it does
	// not exist.
	FileContent(ctx context.Context, path string) (content string, ok bool, err error)
	// Reader reads the whole session part by part within the same read:
	// for a page state that has to be folded from the log.
	Reader(ctx context.Context) Reader
	// EventsOfType reads the session's stored events of one type, in order.
	EventsOfType(ctx context.Context, typ delegation.EventType) ([]delegation.Event, error)
	// StepOf is the step (from 1) of the call whose model.started has seq.
	StepOf(ctx context.Context, seq int64) (int, error)
	// CountsAt reads each agent's calls begun at or before a seq, and their
	// input tokens.
	CountsAt(ctx context.Context, seq int64) (map[string]AgentCounts, error)
	// AgentCallsHead reads an agent's first calls, at most limit, in order.
	AgentCallsHead(ctx context.Context, agentID string, limit int) ([]CallRow, error)
	// AgentCallsTail reads an agent's last calls at or before a seq, at most
	// limit, in order.
	AgentCallsTail(ctx context.Context, agentID string, seq int64, limit int) ([]CallRow, error)
	// ToolEvents reads the tool.started, tool.finished and model.finished
	// events with seq in [from, to], in order.
	ToolEvents(ctx context.Context, from, to int64) ([]delegation.Event, error)
}
