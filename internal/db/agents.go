package db

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// An agent is one row, written at its agent.started, which is read back
// from it, and completed at its agent.finished.

// agentRow is a stored agent: the trace's, and what else its agent.started
// said.
type agentRow struct {
	trace.Agent
	MaxSteps int
}

const agentColumns = `id, name, parent_id, mode, task_call_id, status, error, invocation,
	system_prompt, system_tokens, tools, steps, max_steps, model, endpoint, price`

func scanAgentRow(row scanner) (agentRow, error) {
	var a agentRow
	var parent, mode, task sql.NullString
	var tools string
	var price sql.NullString
	if err := row.Scan(&a.ID, &a.Name, &parent, &mode, &task, &a.Status, &a.Error, &a.Invocation,
		&a.SystemPrompt, &a.SystemTokens, &tools, &a.Steps, &a.MaxSteps, &a.Model, &a.Endpoint, &price); err != nil {
		return a, err
	}
	var err error
	if a.Price, err = fromJSON[delegation.Price](price); err != nil {
		return a, fmt.Errorf("agent %s price: %w", a.ID, err)
	}
	a.ParentID, a.Mode, a.TaskCallID = strPtr(parent), strPtr(mode), strPtr(task)
	if err := json.Unmarshal([]byte(tools), &a.Tools); err != nil {
		return a, fmt.Errorf("agent %s tools: %w", a.ID, err)
	}
	return a, nil
}

// agentRowOf is the row an agent.started makes.
func agentRowOf(d *delegation.AgentStarted) *agentRow {
	a := &agentRow{MaxSteps: d.MaxSteps}
	a.ID, a.Name, a.Invocation = d.Agent.ID, d.Agent.Name, d.Agent.Invocation
	a.ParentID, a.Mode, a.TaskCallID = nonEmpty(d.Agent.ParentID), nonEmpty(string(d.Agent.Mode)), nonEmpty(d.Agent.TaskCallID)
	a.SystemPrompt, a.SystemTokens, a.Tools, a.Model, a.Endpoint, a.Price = d.SystemPrompt, d.SystemTokens, d.Tools, d.Model, d.Endpoint, d.Price
	return a
}

// started is the agent.started the row was made from.
func (a *agentRow) started() delegation.AgentStarted {
	return delegation.AgentStarted{
		Agent: delegation.AgentInfo{ID: a.ID, Name: a.Name, ParentID: deref(a.ParentID), Mode: delegation.Mode(deref(a.Mode)),
			TaskCallID: deref(a.TaskCallID), Invocation: a.Invocation},
		SystemPrompt: a.SystemPrompt, SystemTokens: a.SystemTokens, Tools: a.Tools, MaxSteps: a.MaxSteps,
		Model: a.Model, Endpoint: a.Endpoint, Price: a.Price,
	}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
