// Package tokens counts the tokens a model receives: messages, system
// prompts and tool definitions.
//
// Three tokenizers are available. o200k_base (the default) and cl100k_base
// are exact byte-pair encoders that give the same token IDs as OpenAI's
// tiktoken; their vocabularies are bundled, so they work without a network.
// approx is LangChain's estimate, count_tokens_approximately: the number of
// characters (Unicode code points, as Python's len counts them) divided by
// four, rounded up. deepagents counts a tool definition as its JSON, so the
// engine hands every counter a tool as delegation.ToolJSON, the JSON Python's
// json.dumps writes: with approx, a definition of 1,957 characters costs 490.
//
// The BPE tokenizers are built for counting many short texts quickly: the
// split step is a hand-written scanner equivalent to tiktoken's regular
// expressions, and the token count of every piece that is not a single
// vocabulary entry is kept in a small bounded cache.
package tokens

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Counter counts tokens of text with one tokenizer.
type Counter interface {
	Count(text string) int
	Name() string
}

// Default is o200k_base, the tokenizer Get returns for the empty name.
const Default = nameO200K

// The tokenizer names.
const (
	nameO200K  = "o200k_base"
	nameCL100K = "cl100k_base"
	nameApprox = "approx"
)

// Names lists the tokenizers: "o200k_base", "cl100k_base", "approx".
func Names() []string {
	return []string{nameO200K, nameCL100K, nameApprox}
}

// Get returns the named tokenizer; "" means o200k_base. An unknown name is an
// error that lists the valid names.
//
// Get is cheap: a BPE tokenizer loads its vocabulary on its first use, once
// per process, and the same Counter is returned on every call.
func Get(name string) (Counter, error) {
	switch name {
	case "", nameO200K:
		return o200k, nil
	case nameCL100K:
		return cl100k, nil
	case nameApprox:
		return approxCounter{}, nil
	}
	return nil, fmt.Errorf("unknown tokenizer %q; use one of %s", name, strings.Join(Names(), ", "))
}

// approxCounter is LangChain's estimate of a token count: characters / 4,
// rounded up, where a character is a Unicode code point.
type approxCounter struct{}

// Count returns ceil(code points / 4). Each byte of invalid UTF-8 counts as
// one code point, as it does when Go decodes a string.
func (approxCounter) Count(text string) int {
	return (utf8.RuneCountInString(text) + 3) / 4
}

// Name returns "approx".
func (approxCounter) Name() string { return nameApprox }

// Warm opens the BPE tokenizers now, so that no later Count waits for it;
// a server calls it in the background at start-up.
func Warm() {
	o200k.load()
	cl100k.load()
}
