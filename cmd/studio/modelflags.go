package main

import (
	"github.com/delegationstudio/studio/internal/model/openai"
	"github.com/delegationstudio/studio/internal/scenario"
)

// modelFlags are studio run's flags that set a scenario's fields
// (scenario.Flags): each one given wins over the fields it names, and the
// file is checked with them.
type modelFlags struct {
	c                  *command
	url, model, keyEnv *string
	noStream           *bool
}

func defineModelFlags(c *command) *modelFlags {
	return &modelFlags{c: c,
		url: c.String("model-url", "", "", "run against the model at this `URL` (e.g. http://127.0.0.1:8080/v1), over the file's model.base_url, model.endpoint and agent.base_url; "+
			"unset there too: $OPENAI_BASE_URL, then OpenAI's", nil),
		model: c.String("model", "", "", "the `name` of the model to call, over the file's model.model; its key comes from --api-key-env, "+
			"then the file's model.api_key_env, or $OPENAI_API_KEY at OpenAI (or $OPENAI_BASE_URL)", nil),
		keyEnv: c.String("api-key-env", "", "", "read the model's key from this `variable` (a *_API_KEY one), over the file's model.api_key_env", nil),
	}
}

// flags are the fields the command line sets. An endpoint is asked for
// with a model name, or with a URL or a key variable on the command line;
// a URL in the environment alone is a default that runs nothing.
func (m *modelFlags) flags() scenario.Flags {
	fl := scenario.Flags{NoStream: *m.noStream}
	if *m.model != "" || m.c.given("model-url") == "flag" || m.c.given("api-key-env") == "flag" {
		// As run, in the trace: the endpoint the SDKs' variable names.
		fl.BaseURL, fl.Model, fl.APIKeyEnv, fl.FallbackURL = *m.url, *m.model, *m.keyEnv, openai.BaseURLFromEnv()
	}
	return fl
}

// flagFunc says which flag sets a scenario field: as its usage says it
// ("" for none), and, when it set it, where it came from (--model,
// $STUDIO_MODEL).
type flagFunc func(field string) (usage, from string)

// flagFor is the flag that sets field: the fields scenario.Flags sets,
// as the command line names them.
func (m *modelFlags) flagFor(field string) (usage, from string) {
	name := ""
	switch field {
	case "model.model":
		name, usage = "model", "--model NAME"
	case "model.base_url", "model.endpoint", "agent.base_url":
		name, usage = "model-url", "--model-url URL"
	case "model.api_key_env":
		name, usage = "api-key-env", "--api-key-env VAR"
	case "script":
		return "--model-url URL --model NAME to run it against a model", ""
	default:
		return "", ""
	}
	fl := m.flags()
	if set := map[string]string{"model": fl.Model, "model-url": fl.BaseURL, "api-key-env": fl.APIKeyEnv}[name]; set != "" {
		from = m.c.given(name)
		if from == "flag" {
			from = "--" + name
		}
	}
	return usage, from
}
