package approval

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/replayctl/replayctl/internal/triage"
)

// DefaultExpiry is how long a request stays open when the file says nothing.
const DefaultExpiry = 24 * time.Hour

// Config is approvers.yaml: the approver groups and their members, and how
// long a request stays open.
//
//	expiry: 24h
//	groups:
//	  platform-oncall: [alice, bob]
//	  payments-oncall: [carol]
type Config struct {
	Expiry time.Duration       `yaml:"expiry"`
	Groups map[string][]string `yaml:"groups"`

	// Path is where the file was looked for (absolute when known) and
	// Missing says it was not there: a refusal then names the file and
	// its expected path instead of only "not a member".
	Path    string `yaml:"-"`
	Missing bool   `yaml:"-"`
}

// where explains, for a refusal, where group's members come from.
func (c *Config) where(group string) string {
	p := c.Path
	if p == "" {
		p = "approvers.yaml"
	}
	switch {
	case c.Missing:
		return fmt.Sprintf("no approvers file: %s does not exist; copy the commented approvers.yaml shipped with replayctl there and list the group's members, or give --approvers FILE", p)
	case c.Groups[group] == nil:
		return fmt.Sprintf("group %q is not defined in %s", group, p)
	}
	return "members are listed in " + p
}

// LoadConfig reads approvers.yaml strictly. A missing file gives an empty
// configuration (nobody may approve), which `approvals approve` explains.
func LoadConfig(path string) (*Config, error) {
	c := &Config{Expiry: DefaultExpiry, Groups: map[string][]string{}, Path: path}
	if abs, err := filepath.Abs(path); err == nil {
		c.Path = abs
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		c.Missing = true
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read approvers: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		ce := &triage.ConfigError{}
		ce.Problems = append(ce.Problems, triage.Problem{File: path, Msg: err.Error()})
		return nil, ce
	}
	if c.Expiry <= 0 {
		c.Expiry = DefaultExpiry
	}
	return c, nil
}

// Member reports whether user belongs to group.
func (c *Config) Member(group, user string) bool {
	return slices.ContainsFunc(c.Groups[group], func(m string) bool { return SameIdentity(m, user) })
}
