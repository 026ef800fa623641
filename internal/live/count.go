package live

// ViewerCount is the number of current subscribers of every session, for
// the server's metrics.
func (h *Hub) ViewerCount() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for _, s := range h.sessions {
		s.mu.Lock()
		n += len(s.subs)
		s.mu.Unlock()
	}
	return n
}
