package templates

import "net/url"

// The addresses of a session's pages, spelled once: the templates, the
// presenter and the server's redirects and API answers all build them here.

// SessionURL is a session's page.
func SessionURL(id string) string { return "/sessions/" + id }

// CallURL is one model call's page.
func CallURL(sessionID, callID string) string { return SessionURL(sessionID) + "/calls/" + callID }

// MessageURL is one message's page.
func MessageURL(sessionID, messageID string) string {
	return SessionURL(sessionID) + "/messages/" + messageID
}

// AgentURL is the session page with an agent's delegation panel open.
func AgentURL(sessionID, agentID string) string {
	return SessionURL(sessionID) + "?agent=" + agentID + "#delegation"
}

// FileURL is one file of the session's, as it is now.
func FileURL(sessionID, path string) string {
	return SessionURL(sessionID) + "/file?path=" + url.QueryEscape(path)
}

// FilesURL is the next page of the session's files, after a path.
func FilesURL(sessionID, after string) string {
	return SessionURL(sessionID) + "/files?after=" + url.QueryEscape(after)
}

// InheritedURL is what a fork pane inherited, whole.
func InheritedURL(sessionID, pane string) string {
	return SessionURL(sessionID) + "/inherited?pane=" + url.QueryEscape(pane)
}

// TimelineURL is the session page with every call of the timeline shown,
// at an anchor ("timeline-card", "lane-a1").
func TimelineURL(sessionID, anchor string) string {
	return SessionURL(sessionID) + "?timeline=all#" + anchor
}

// StopURL is where a session is asked to stop.
func StopURL(sessionID string) string { return SessionURL(sessionID) + "/stop" }
