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

// Token is a stored credential: only its hash is kept.
type Token struct {
	User    string    `json:"user"`
	Role    string    `json:"role"`
	Hash    string    `json:"sha256"`
	Created time.Time `json:"created"`
}

// Tokens is the token file (JSON), read at start.
type Tokens struct {
	mu     sync.RWMutex
	path   string
	tokens []Token
}

// LoadTokens reads the token file; a missing file means no tokens yet.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	if err := json.Unmarshal(data, &t.tokens); err != nil {
		return nil, fmt.Errorf("%s: not a token file: %w", path, err)
	}
	return t, nil
}

func hashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Create adds a token for user with role, saves the file (mode 0600) and
// returns the secret, which is shown once and never stored.
func (t *Tokens) Create(user, role string, now time.Time) (string, error) {
	if user == "" {
		return "", errors.New("a user is required")
	}
	valid := false
	for _, r := range Roles {
		valid = valid || r == role
	}
	if !valid {
		return "", fmt.Errorf("unknown role %q (want viewer, operator, approver or admin)", role)
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	secret := "rpl_" + hex.EncodeToString(raw[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = append(t.tokens, Token{User: user, Role: role, Hash: hashToken(secret), Created: now.UTC()})
	data, err := json.MarshalIndent(t.tokens, "", "  ")
	if err != nil {
		return "", err
	}
	tmp := t.path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, t.path); err != nil {
		return "", err
	}
	_ = syncDir(filepath.Dir(t.path))
	return secret, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Lookup finds the token for a secret, comparing hashes in constant time.
func (t *Tokens) Lookup(secret string) (Token, bool) {
	if secret == "" {
		return Token{}, false
	}
	h := hashToken(secret)
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, tok := range t.tokens {
		if subtle.ConstantTimeCompare([]byte(tok.Hash), []byte(h)) == 1 {
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
