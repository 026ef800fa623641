package server

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
)

// hostPolicy says which names the studio answers to. A page on
// attacker.example whose name is rebound to 127.0.0.1 reaches the studio
// with "Host: attacker.example": same-origin for the browser, so without
// this check it could read every session and start sessions (DNS
// rebinding). The names allowed are the loopback ones, the address the
// studio listens on, and those its operator allows; an IP address is its
// own origin and cannot be rebound, so beyond loopback one is allowed when
// the studio listens on every address.
type hostPolicy struct {
	listenHost string // lower case; "" when listening on every address
	allowed    map[string]bool
}

func newHostPolicy(addr string, allowed []string) hostPolicy {
	p := hostPolicy{allowed: map[string]bool{}}
	if h, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(h); h != "" && (ip == nil || !ip.IsUnspecified()) {
			p.listenHost = strings.ToLower(h)
		}
	}
	for _, h := range allowed {
		p.allowed[normalHost(h)] = true
	}
	return p
}

// normalHost is a host name without its port, brackets or final dot, in
// lower case.
func normalHost(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// allows reports whether a request's Host names this studio.
func (p hostPolicy) allows(hostport string) bool {
	h := normalHost(hostport)
	if h == "" {
		return false
	}
	if h == "localhost" || p.allowed[h] || h == p.listenHost {
		return true
	}
	ip := net.ParseIP(h)
	if ip == nil {
		return false
	}
	return ip.IsLoopback() || p.listenHost == ""
}

// checkHost refuses requests for a name the studio does not answer to
// (421 Misdirected Request), and state-changing requests and websockets
// that come from a page of another origin (403).
func (s *Server) checkHost(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if !s.hosts.allows(r.Host) {
			name := normalHost(r.Host)
			return echo.NewHTTPError(http.StatusMisdirectedRequest,
				"This studio does not answer to the name "+quoteName(name)+" (the request's Host): open it by its address, "+
					"or, if that name is yours, start the studio with --allowed-host "+name+".")
		}
		if changesState(r) || isWebsocket(r) {
			if why := s.crossOrigin(r); why != "" {
				return echo.NewHTTPError(http.StatusForbidden, why)
			}
		}
		return next(c)
	}
}

func changesState(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

func isWebsocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// crossOrigin says why a request came from a page of another origin, or
// "". A request without Origin is not a browser's cross-origin one
// (browsers send it on every POST and websocket): scripts and curl pass.
// Another port of the same host is another origin, though the same site.
func (s *Server) crossOrigin(r *http.Request) string {
	const refused = "This request came from a page of another site or port than this studio, and was refused: use the studio's own pages, or call the API from a script."
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return refused
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return refused // "null", from a sandboxed frame or a file
	}
	if strings.EqualFold(u.Host, r.Host) {
		return ""
	}
	// The same studio by another of its names (localhost for 127.0.0.1):
	// the port must still be the one the request came to.
	if s.hosts.allows(u.Host) && portOf(u.Port(), u.Scheme == "https") == portOf(requestPort(r), r.TLS != nil) {
		return ""
	}
	return refused
}

func requestPort(r *http.Request) string {
	if _, port, err := net.SplitHostPort(r.Host); err == nil {
		return port
	}
	return ""
}

// portOf is a port as given, or its scheme's default.
func portOf(port string, tls bool) string {
	switch {
	case port != "":
		return port
	case tls:
		return "443"
	}
	return "80"
}

// quoteName quotes a host name for a message, cut short.
func quoteName(name string) string {
	if len(name) > 80 {
		name = name[:80] + "…"
	}
	return `"` + name + `"`
}
