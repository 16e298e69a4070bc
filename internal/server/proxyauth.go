package server

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// ProxyAuth authenticates people through a trusted reverse proxy
// (oauth2-proxy style): the proxy signs the user in and sets
// X-Forwarded-User and X-Forwarded-Groups. Those headers are believed only
// on connections from Trusted networks: anyone else could send them.
// Bearer tokens stay for machines and take precedence.
type ProxyAuth struct {
	Trusted []netip.Prefix
	// Roles maps a proxy group to a replayctl role; a user in several
	// groups gets the strongest (admin > operator > approver > viewer).
	Roles map[string]string
	// DefaultRole is the role of a signed-in user none of whose groups is
	// mapped ("" : such a user is not let in).
	DefaultRole string
}

var roleRank = map[string]int{RoleViewer: 1, RoleApprover: 2, RoleOperator: 3, RoleAdmin: 4}

// ParseRoleMapping reads GROUP=ROLE (the --proxy-role flag).
func ParseRoleMapping(specs []string) (map[string]string, error) {
	m := map[string]string{}
	for _, s := range specs {
		g, r, ok := strings.Cut(s, "=")
		if !ok || g == "" || roleRank[r] == 0 {
			return nil, fmt.Errorf("proxy role %q: want GROUP=ROLE with ROLE viewer, operator, approver or admin", s)
		}
		m[g] = r
	}
	return m, nil
}

// authenticate returns the proxy's user, when the request comes from a
// trusted proxy and names one.
func (p *ProxyAuth) authenticate(r *http.Request) (Token, bool) {
	if p == nil || len(p.Trusted) == 0 {
		return Token{}, false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return Token{}, false
	}
	addr := ap.Addr().Unmap()
	trusted := false
	for _, n := range p.Trusted {
		if n.Contains(addr) {
			trusted = true
			break
		}
	}
	usr := strings.TrimSpace(r.Header.Get("X-Forwarded-User"))
	if !trusted || usr == "" {
		return Token{}, false
	}
	role := p.DefaultRole
	for _, g := range strings.Split(r.Header.Get("X-Forwarded-Groups"), ",") {
		if mapped := p.Roles[strings.TrimSpace(g)]; roleRank[mapped] > roleRank[role] {
			role = mapped
		}
	}
	if role == "" {
		return Token{}, false
	}
	return Token{User: usr, Role: role}, true
}
