package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Roles, from least to most powerful for operations; approver is apart:
// it reads and decides approvals for its groups.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
	RoleApprover = "approver"
	RoleAdmin    = "admin"
)

// Roles lists every role.
var Roles = []string{RoleViewer, RoleOperator, RoleApprover, RoleAdmin}

// Token is a stored credential: only its hash is kept. A revoked or
// expired token stays in the file (who had access, and until when) but
// authenticates nothing.
type Token struct {
	// ID names the token for list and revoke; it is random, not derived
	// from the secret. Files written before ids existed get one on load
	// (the hash's first 12 hex digits, stable across loads).
	ID      string     `json:"id,omitempty"`
	User    string     `json:"user"`
	Role    string     `json:"role"`
	Hash    string     `json:"sha256"`
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires,omitempty"`
	Revoked *time.Time `json:"revoked,omitempty"`
	// Groups are approvers.yaml groups the user belongs to by a trusted
	// proxy's group header (ProxyAuth.ApproverGroups); never stored.
	Groups []string `json:"-"`
}

// Status is "active", "expired" or "revoked" at now.
func (t Token) Status(now time.Time) string {
	switch {
	case t.Revoked != nil:
		return "revoked"
	case t.Expires != nil && !now.Before(*t.Expires):
		return "expired"
	}
	return "active"
}

// Tokens is the token file (JSON). A running server re-reads it when it
// changes (checked on every lookup: one stat), so `tokens revoke`, an
// expiry and a new token take effect without a restart.
type Tokens struct {
	// Now is the clock for expiry (time.Now when nil).
	Now func() time.Time

	mu     sync.RWMutex
	path   string
	tokens []Token
	// seen is the file as last read (nil: it did not exist); bad is set
	// when the file changed into something unreadable: then every lookup
	// fails (closed) until it is fixed.
	seen os.FileInfo
	bad  error
}

// ErrTokenNotFound: no token has the id given to Revoke.
var ErrTokenNotFound = errors.New("no such token")

// LoadTokens reads the token file; a missing file means no tokens yet.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// reload reads the file into t; the caller holds the write lock (or owns t).
func (t *Tokens) reload() error {
	fi, err := os.Stat(t.path)
	if errors.Is(err, os.ErrNotExist) {
		t.tokens, t.seen, t.bad = nil, nil, nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("read tokens: %w", err)
	}
	data, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("read tokens: %w", err)
	}
	var toks []Token
	if err := json.Unmarshal(data, &toks); err != nil {
		return fmt.Errorf("%s: not a token file: %w", t.path, err)
	}
	for i := range toks {
		if toks[i].ID == "" && len(toks[i].Hash) >= 12 {
			toks[i].ID = "tok_" + toks[i].Hash[:12]
		}
	}
	t.tokens, t.seen, t.bad = toks, fi, nil
	return nil
}

// fresh re-reads the file when it changed since the last read. Renames
// (how every writer here saves) change the inode, edits the size or mtime.
func (t *Tokens) fresh() {
	fi, err := os.Stat(t.path)
	t.mu.RLock()
	seen := t.seen
	t.mu.RUnlock()
	switch {
	case err != nil && seen == nil:
		return
	case err == nil && seen != nil && os.SameFile(fi, seen) && fi.Size() == seen.Size() && fi.ModTime().Equal(seen.ModTime()):
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		// Fail closed: a token file that cannot be read authenticates no
		// one, rather than the tokens it held before a revocation.
		t.tokens, t.seen, t.bad = nil, fi, err
	}
}

func (t *Tokens) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func hashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Create adds a token for user with role that never expires; see
// CreateExpiring.
func (t *Tokens) Create(user, role string, now time.Time) (string, error) {
	return t.CreateExpiring(user, role, now, 0)
}

// CreateExpiring adds a token for user with role, valid for ttl (0: no
// expiry), saves the file (mode 0600) and returns the secret, which is
// shown once and never stored.
func (t *Tokens) CreateExpiring(user, role string, now time.Time, ttl time.Duration) (string, error) {
	secret, _, err := t.Issue(user, role, now, ttl)
	return secret, err
}

// Issue is CreateExpiring that also returns the stored token (id,
// expiry): `tokens create -o json` prints it without reading the file
// back, where another process's new token may already be the last one.
func (t *Tokens) Issue(user, role string, now time.Time, ttl time.Duration) (string, Token, error) {
	if user == "" {
		return "", Token{}, errors.New("a user is required")
	}
	valid := false
	for _, r := range Roles {
		valid = valid || r == role
	}
	if !valid {
		return "", Token{}, fmt.Errorf("unknown role %q (want viewer, operator, approver or admin)", role)
	}
	if ttl < 0 {
		return "", Token{}, fmt.Errorf("expiry %s: must not be negative", ttl)
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Token{}, err
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", Token{}, err
	}
	secret := "rpl_" + hex.EncodeToString(raw[:])
	tok := Token{ID: "tok_" + hex.EncodeToString(id[:]), User: user, Role: role, Hash: hashToken(secret), Created: now.UTC()}
	if ttl > 0 {
		exp := now.Add(ttl).UTC()
		tok.Expires = &exp
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	unlock, err := lockTokenFile(t.path)
	if err != nil {
		return "", Token{}, err
	}
	defer unlock()
	// Another process may have written the file since it was loaded.
	if err := t.reload(); err != nil {
		return "", Token{}, err
	}
	t.tokens = append(t.tokens, tok)
	return secret, tok, t.save()
}

// List returns every token in the file (as it is now), revoked and
// expired ones included.
func (t *Tokens) List() ([]Token, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.reload(); err != nil {
		return nil, err
	}
	return append([]Token(nil), t.tokens...), nil
}

// Revoke marks the token with id revoked at now and saves the file; a
// server using the file refuses the token from its next request on.
// Revoking a revoked token is not an error (it keeps its first time).
func (t *Tokens) Revoke(id string, now time.Time) (Token, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	unlock, err := lockTokenFile(t.path)
	if err != nil {
		return Token{}, err
	}
	defer unlock()
	if err := t.reload(); err != nil {
		return Token{}, err
	}
	for i := range t.tokens {
		if t.tokens[i].ID != id {
			continue
		}
		if t.tokens[i].Revoked == nil {
			r := now.UTC()
			t.tokens[i].Revoked = &r
			if err := t.save(); err != nil {
				return Token{}, err
			}
		}
		return t.tokens[i], nil
	}
	return Token{}, fmt.Errorf("%w: %q in %s (replayctl tokens list shows the ids)", ErrTokenNotFound, id, t.path)
}

// save writes the file atomically and durably; the caller holds the write
// lock and the file lock. Each save writes its own temporary file: with one
// fixed name (tokens.json.tmp) two processes wrote into each other's, and
// 13 printed tokens were never stored, a revocation reported done lost.
func (t *Tokens) save() error {
	data, err := json.MarshalIndent(t.tokens, "", "  ")
	if err != nil {
		return err
	}
	dir, base := filepath.Split(t.path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, base+".*.tmp") // mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, t.path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("save %s: %w", t.path, err)
	}
	// The rename is durable only once the directory is synced: a revoke
	// that said "revoked" must not come back after a crash.
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("save %s: sync directory: %w", t.path, err)
	}
	if fi, err := os.Stat(t.path); err == nil {
		t.seen = fi
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Lookup finds the active token for a secret, comparing hashes in
// constant time; a revoked or expired token is not found.
func (t *Tokens) Lookup(secret string) (Token, bool) {
	if secret == "" {
		return Token{}, false
	}
	return t.byHash(hashToken(secret))
}

// byHash finds an active token by its stored hash, after reloading a
// changed file. A UI session follows its token through it, so a token
// revoked, expired or removed from the file ends its sessions too.
func (t *Tokens) byHash(h string) (Token, bool) {
	t.fresh()
	now := t.now()
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, tok := range t.tokens {
		if subtle.ConstantTimeCompare([]byte(tok.Hash), []byte(h)) == 1 {
			if tok.Status(now) != "active" {
				return Token{}, false
			}
			return tok, true
		}
	}
	return Token{}, false
}

// Permissions.
type perm int

const (
	permRead perm = iota
	permOperate
	permApprove
)

// roles names the roles that hold p, for a refusal that says what would do.
func (p perm) roles() string {
	switch p {
	case permOperate:
		return RoleOperator + " or " + RoleAdmin
	case permApprove:
		return RoleApprover + " or " + RoleAdmin
	}
	return "any role"
}

func (t Token) can(p perm) bool {
	switch p {
	case permRead:
		return true
	case permOperate:
		return t.Role == RoleOperator || t.Role == RoleAdmin
	case permApprove:
		return t.Role == RoleApprover || t.Role == RoleAdmin
	}
	return false
}
