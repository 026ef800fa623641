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
	"github.com/delegationstudio/studio/internal/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// team is what the scenario as run says that the log does not: the
// provider, each agent's model and endpoint, the agents' descriptions and
// their tools' descriptions.
type team struct {
	provider string
	// engine: our engine ran the session, and made its calls as the
	// scenario says (teamOf).
	engine      bool
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

// providerUnknown is the provider an export names where no one said whose
// API a received or recorded session's calls spoke.
const providerUnknown = "unknown"

// teamOf is what the export says of the session's team. For a session our
// engine ran: the scenario's provider, endpoints and request settings. For
// a received or recorded one our engine made none of the calls: the
// provider its origin names, else "unknown", never the scripted model's
// (that name tells an import the usage is the studio's own count, and
// these calls' usage is the endpoint's), and none of the scenario's
// endpoints or settings, which it did not send.
func teamOf(h trace.Head) team {
	t := readTeam(h.Scenario)
	o := h.Session.Origin
	if o.OriginKind() == delegation.OriginEngine {
		t.engine = true
		return t
	}
	t.provider = o.Provider
	if t.provider == "" || t.provider == scenario.ProviderScripted {
		t.provider = providerUnknown
	}
	return t
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

// remote reports whether our engine called the agents' models over the
// network.
func (t team) remote() bool {
	return t.engine && (t.provider == scenario.ProviderOpenAI || t.provider == scenario.ProviderAnthropic)
}

// ownCount reports whether a call's usage is the studio's own count: our
// engine's scripted model's, which no endpoint reported.
func (t team) ownCount() bool { return t.engine && !t.remote() }

// settings are the request parameters of an agent's calls to an endpoint,
// with what it inherits.
func (t team) settings(agentName string) scenario.Settings { return t.file.AgentSettings(agentName) }

// endpoint is the base URL an agent's calls go to: a subagent's own
// base_url, else the main agent's, else OpenAI's.
func (t team) endpoint(agentName string) (string, bool) {
	if !t.remote() {
		return "", false
	}
	base := t.mainURL
	if s, found := t.subagents[agentName]; found && agentName != "main" && s.baseURL != "" {
		base = s.baseURL
	}
	if base == "" {
		base = openai.DefaultBaseURL
	}
	return base, true
}

// endpointAttrs say where an agent's calls went: the endpoint's host and
// port (server.address, server.port, as the GenAI conventions have it), and
// its whole base URL (delegation.endpoint: the conventions name no
// attribute for it; url.full is an HTTP request's URL), so that an import
// has the endpoint as it was. The URL is written without credentials, query
// or fragment, where a key could be.
func endpointAttrs(base string) []*commonpb.KeyValue {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return nil
	}
	host, port, ok := hostPort(u)
	if !ok {
		return nil
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return []*commonpb.KeyValue{str("server.address", host), integer("server.port", int64(port)),
		str("delegation.endpoint", u.String())}
}

// hostPort is an endpoint's host and port, for server.address and
// server.port.
func hostPort(u *url.URL) (host string, port int, ok bool) {
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
