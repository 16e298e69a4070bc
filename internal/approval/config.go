package approval

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
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
}

// LoadConfig reads approvers.yaml strictly. A missing file gives an empty
// configuration (nobody may approve), which `approvals approve` explains.
func LoadConfig(path string) (*Config, error) {
	c := &Config{Expiry: DefaultExpiry, Groups: map[string][]string{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
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
	return slices.Contains(c.Groups[group], user)
}
