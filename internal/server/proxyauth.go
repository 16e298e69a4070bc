package server

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
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
	// ApproverGroups maps a proxy group to an approvers.yaml group: a user
	// in the proxy group may decide that group's requests (as if listed in
	// approvers.yaml), and is at least an approver.
	ApproverGroups map[string]string
}

// ParseApproverGroupMapping reads SSO_GROUP=APPROVER_GROUP (the
// --proxy-approver-group flag).
func ParseApproverGroupMapping(specs []string) (map[string]string, error) {
	m := map[string]string{}
	for _, s := range specs {
		g, a, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(g) == "" || strings.TrimSpace(a) == "" {
			return nil, fmt.Errorf("proxy approver group %q: want PROXY_GROUP=APPROVER_GROUP (a group of approvers.yaml)", s)
		}
		m[strings.TrimSpace(g)] = strings.TrimSpace(a)
	}
	return m, nil
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
	var groups []string
	for _, g := range strings.Split(r.Header.Get("X-Forwarded-Groups"), ",") {
		g = strings.TrimSpace(g)
		if mapped := p.Roles[g]; roleRank[mapped] > roleRank[role] {
			role = mapped
		}
		if ag, ok := p.ApproverGroups[g]; ok && !slices.Contains(groups, ag) {
			groups = append(groups, ag)
		}
	}
	// A member of an approver group must be able to approve: viewer (or
	// nothing) becomes approver; operator cannot approve at all, so it
	// becomes admin only if mapped so, never here.
	if len(groups) > 0 && roleRank[role] < roleRank[RoleApprover] {
		role = RoleApprover
	}
	if role == "" {
		return Token{}, false
	}
	return Token{User: usr, Role: role, Groups: groups}, true
}
