package scenario

import (
	"encoding/json"

	"github.com/delegationstudio/studio/internal/delegation"
)

// InMode is the scenario doc with every subagent in one mode, the built-in
// general-purpose one included (declared, so its mode can change): the
// "both modes" comparison runs a scenario once this way per mode. A fork
// inherits its parent's skills and tools, so in fork mode a subagent's own
// lists are dropped. The name (and the title, if any) say the mode.
func InMode(doc []byte, mode delegation.Mode) (*Scenario, error) {
	var f File
	if err := json.Unmarshal(doc, &f); err != nil {
		return nil, delegation.Errorf(delegation.EINVALID, "the scenario cannot be read: %v", err)
	}
	return rebuild(f.inMode(mode))
}

// inMode is f with every subagent in mode; see InMode.
func (f File) inMode(mode delegation.Mode) File {
	subs := make([]Subagent, 0, len(f.Subagents)+1)
	declared := false
	for _, s := range f.Subagents {
		s.Mode = string(mode)
		if mode == delegation.ModeFork {
			s.Skills = nil // a fork inherits its parent's
			s.Tools = nil  // and its tools
		}
		declared = declared || s.Name == delegation.GeneralPurposeName
		subs = append(subs, s)
	}
	gpOff := f.Agent != nil && f.Agent.GeneralPurpose != nil && !*f.Agent.GeneralPurpose
	if !declared && !gpOff {
		gp := delegation.GeneralPurpose
		subs = append([]Subagent{{Name: gp.Name, Description: gp.Description, SystemPrompt: gp.SystemPrompt,
			Mode: string(mode)}}, subs...)
	}
	if len(subs) > 0 { // nil means none given
		f.Subagents = subs
	}
	f.Name += " (" + string(mode) + ")"
	if f.Title != "" {
		f.Title += " — all subagents " + string(mode)
	}
	return f
}
