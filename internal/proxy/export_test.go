package proxy

// SetMaxAnswer sets the largest answer and stream event relayed, for a
// test; the returned function puts it back.
func SetMaxAnswer(n int) (restore func()) {
	old := maxAnswer
	maxAnswer = n
	return func() { maxAnswer = old }
}
