package delegation

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io"
	"strconv"
	"sync"
)

// A provider's prompt cache serves the longest prefix of a request that it
// has seen before, reading the request in this order: the tool definitions,
// then the system prompt, then the messages (Anthropic documents the order;
// OpenAI caches any exact prefix). The studio estimates what a cache can
// serve each call: the tokens of the longest prefix its request shares with
// a request made earlier in the session. It compares element by element —
// the tool definitions as one block (changing any tool changes every
// position after it, as Anthropic documents), the system prompt, then each
// message — so a partly equal element counts as different, and a real
// cache, which works in blocks (OpenAI: from 1,024 tokens, in steps of 128)
// and may not yet hold a request made a moment before, serves at most this.
// The endpoint's own figure, when it reports one, is recorded beside it.

// PrefixKey identifies one element of a request as a cache compares it: a
// hash of what the model receives of it.
type PrefixKey [16]byte

// Kinds of element, hashed first so equal text in different places differs.
const (
	keyTools   = 't'
	keySystem  = 's'
	keyMessage = 'm'
)

type keyHasher struct {
	h   hash.Hash
	buf [8]byte
}

func newKeyHasher(kind byte) *keyHasher {
	k := &keyHasher{h: sha256.New()}
	k.h.Write([]byte{kind})
	return k
}

// part adds a length-prefixed string, so parts never run into each other.
func (k *keyHasher) part(s string) {
	binary.LittleEndian.PutUint64(k.buf[:], uint64(len(s)))
	k.h.Write(k.buf[:])
	io.WriteString(k.h, s)
}

func (k *keyHasher) key() PrefixKey {
	var sum [sha256.Size]byte
	var out PrefixKey
	copy(out[:], k.h.Sum(sum[:0]))
	return out
}

// ToolsKey is the key of a request's tool definitions, as one element: each
// definition as the model receives it (ToolJSON), in order.
func ToolsKey(defs []ToolDef) PrefixKey {
	k := newKeyHasher(keyTools)
	for _, d := range defs {
		k.part(ToolJSON(d))
	}
	return k.key()
}

// SystemKey is the key of a system prompt.
func SystemKey(system string) PrefixKey {
	k := newKeyHasher(keySystem)
	k.part(system)
	return k.key()
}

// MessageKey is the key of a message: what a model receives of it (its
// role, text, tool calls and the call it answers). Its id, kind, token
// count and reasoning are not sent, so they do not count.
func MessageKey(m *Message) PrefixKey {
	k := newKeyHasher(keyMessage)
	k.part(string(m.Role))
	k.part(m.Content)
	k.part(m.ToolCallID)
	k.part(strconv.FormatBool(m.IsError))
	for _, c := range m.ToolCalls {
		k.part(c.ID)
		k.part(c.Name)
		k.part(string(c.Args))
	}
	return k.key()
}

// PrefixRequest is a model call's input in the order a cache reads it.
type PrefixRequest struct {
	Tools        PrefixKey
	ToolTokens   int
	System       PrefixKey
	SystemTokens int
	// Context is what the call received after the system prompt, as ranges
	// of message lists.
	Context []Range
	// Tokens is the whole input's tokens.
	Tokens int
	// Message gives the key and the tokens of message idx of an agent's list.
	Message func(agentID string, idx int) (PrefixKey, int)
}

// PrefixMark is where a request ended in the index. A later request that
// extends it (the same agent's next call, a fork child's first call after
// its parent's) is walked from there, so it costs what it adds.
type PrefixMark struct {
	node          *prefixNode
	tools, system PrefixKey
	context       []Range
}

// PrefixIndex holds every request of a session as a path of a trie whose
// nodes are elements (the tool definitions, the system prompt, messages).
// It is safe for concurrent use: a fan-out's children add theirs at once.
type PrefixIndex struct {
	mu   sync.Mutex
	root prefixNode
}

type prefixNode struct {
	tokens int // of the path from the root to here
	// Most nodes have one child; the others are in more.
	firstKey PrefixKey
	first    *prefixNode
	more     map[PrefixKey]*prefixNode
}

func (n *prefixNode) child(k PrefixKey) *prefixNode {
	if n.first != nil && n.firstKey == k {
		return n.first
	}
	return n.more[k]
}

func (n *prefixNode) add(k PrefixKey, tokens int) *prefixNode {
	c := &prefixNode{tokens: n.tokens + tokens}
	if n.first == nil {
		n.firstKey, n.first = k, c
		return c
	}
	if n.more == nil {
		n.more = map[PrefixKey]*prefixNode{}
	}
	n.more[k] = c
	return c
}

// Add records a request and returns the tokens of the longest prefix it
// shares with one added before: what a prompt cache can serve of it. from
// are marks of earlier requests it may extend, tried in order: when one's
// elements are a prefix of this request's, the walk starts at its end and
// costs the messages this request adds; otherwise it starts at the root.
// The mark returned is where this request ends.
func (x *PrefixIndex) Add(req PrefixRequest, from ...*PrefixMark) (int, *PrefixMark) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, m := range from {
		// A request that an earlier one already held whole (a summary call
		// of the history its agent just sent) is served whole.
		if m != nil && m.tools == req.Tools && m.system == req.System && extends(m.context, req.Context) {
			return req.Tokens, m
		}
	}
	var node *prefixNode
	skip := 0
	for _, m := range from {
		if m != nil && m.tools == req.Tools && m.system == req.System && extends(req.Context, m.context) {
			node, skip = m.node, RangesLen(m.context)
			break
		}
	}
	cached, matched := 0, true
	step := func(k PrefixKey, tokens int) {
		if matched {
			if c := node.child(k); c != nil {
				node, cached = c, c.tokens
				return
			}
			matched = false
		}
		node = node.add(k, tokens)
	}
	if node == nil {
		node = &x.root
		step(req.Tools, req.ToolTokens)
		step(req.System, req.SystemTokens)
	} else {
		cached = node.tokens
	}
	for _, r := range req.Context {
		from := r.From
		if skip >= r.Len() {
			skip -= r.Len()
			continue
		}
		from, skip = from+skip, 0
		for i := from; i < r.To; i++ {
			k, n := req.Message(r.AgentID, i)
			step(k, n)
		}
	}
	return cached, &PrefixMark{node: node, tools: req.Tools, system: req.System, context: append([]Range(nil), req.Context...)}
}

// extends reports whether the messages ctx names begin with those prev
// names, comparing ranges, not messages.
func extends(ctx, prev []Range) bool {
	if len(prev) > len(ctx) {
		return false
	}
	for i, p := range prev {
		c := ctx[i]
		if p.AgentID != c.AgentID || p.From != c.From || p.To > c.To || (i < len(prev)-1 && p.To != c.To) {
			return false
		}
	}
	return true
}
