package otlp

import (
	"encoding/json"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/openai"
	"github.com/delegationstudio/studio/internal/scenario"
)

// team is what the scenario as run says that the log does not: the
// provider, each agent's model and endpoint, the agents' descriptions and
// their tools' descriptions.
type team struct {
	provider    string
	description string // the main agent's: the scenario's description or title
	mainModel   string
	mainURL     string
	subagents   map[string]subagent
	// tools maps an agent's name ("main" or a subagent's) to its tools'
	// descriptions.
	tools map[string]map[string]string
	file  scenario.File // without its script
}

type subagent struct {
	description, model, baseURL string
}

// readTeam reads the scenario as run. A scenario it cannot read (an
// imported trace's, say) names no models and no descriptions; the export
// goes on with what the log says.
func readTeam(raw json.RawMessage) team {
	t := team{provider: scenario.ProviderScripted, subagents: map[string]subagent{}, tools: map[string]map[string]string{}}
	// The script is skipped: it can be most of a long scenario, and says
	// nothing the export needs.
	var f struct {
		scenario.File
		Script *struct{} `json:"script,omitempty"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return t
	}
	file := f.File
	t.file = file
	if m := file.Model; m != nil {
		if m.Provider != "" {
			t.provider = m.Provider
		}
		t.mainURL = m.BaseURL
	}
	if a := file.Agent; a != nil && a.BaseURL != "" {
		t.mainURL = a.BaseURL
	}
	t.description = file.Description
	if t.description == "" {
		t.description = file.Title
	}
	spec := file.TeamSpec()
	t.mainModel = spec.Main.Model
	for _, s := range file.Subagents {
		t.subagents[s.Name] = subagent{description: s.Description, model: s.Model, baseURL: s.BaseURL}
	}
	if tm, err := delegation.BuildTeam(spec); err == nil {
		t.tools["main"] = descriptions(tm.MainTools())
		for _, s := range tm.Subagents {
			t.tools[s.Name] = descriptions(tm.SubagentTools(s.Name))
			if _, ok := t.subagents[s.Name]; !ok { // the built-in general-purpose agent
				t.subagents[s.Name] = subagent{description: s.Description, model: s.Model}
			}
		}
	}
	return t
}

func descriptions(defs []delegation.ToolDef) map[string]string {
	out := make(map[string]string, len(defs))
	for _, d := range defs {
		out[d.Name] = d.Description
	}
	return out
}

// remote reports whether the agents' models are called over the network.
func (t team) remote() bool {
	return t.provider == scenario.ProviderOpenAI || t.provider == scenario.ProviderAnthropic
}

// settings are the request parameters of an agent's calls to an endpoint,
// with what it inherits.
func (t team) settings(agentName string) scenario.Settings { return t.file.AgentSettings(agentName) }

// endpoint is the host and port an agent's calls go to, for server.address
// and server.port: a subagent's own base_url, else the main agent's, else
// OpenAI's.
func (t team) endpoint(agentName string) (host string, port int, ok bool) {
	if !t.remote() {
		return "", 0, false
	}
	base := t.mainURL
	if s, found := t.subagents[agentName]; found && agentName != "main" && s.baseURL != "" {
		base = s.baseURL
	}
	if base == "" {
		base = openai.DefaultBaseURL
	}
	return hostPort(base)
}

// hostPort is an endpoint's host and port, for server.address and
// server.port.
func hostPort(base string) (host string, port int, ok bool) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "", 0, false
	}
	host = u.Hostname()
	if p := u.Port(); p != "" {
		port, _ = strconv.Atoi(p)
	} else if strings.EqualFold(u.Scheme, "http") {
		port = 80
	} else {
		port = 443
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return host, port, true
}
