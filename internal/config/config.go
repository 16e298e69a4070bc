// Package config gives every command-line flag two more sources: a YAML
// file (replayctl.yaml, --config or REPLAYCTL_CONFIG) and an environment
// variable (REPLAYCTL_<FLAG>, dashes as underscores), with the precedence
// flag > environment > file > default. The file's keys are the flags'
// long names, so the README's flag tables document the file too.
package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// EnvPrefix starts every replayctl environment variable.
const EnvPrefix = "REPLAYCTL_"

// Origins of a setting, as `config show` prints them.
const (
	FromFlag    = "flag"
	FromEnv     = "env"
	FromFile    = "file"
	FromDefault = "default"
)

// Config is the file and environment layers, merged (env over file).
type Config struct {
	File   string // the file read, "" if none
	file   *koanf.Koanf
	env    *koanf.Koanf
	merged *koanf.Koanf
	// applied records the origin of every flag Apply set.
	applied map[string]string
}

// EnvName is the environment variable of a flag: max-parallel ->
// REPLAYCTL_MAX_PARALLEL.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Load reads path (when "", REPLAYCTL_CONFIG from environ; when that is
// unset too, no file) and the REPLAYCTL_* variables of environ. A file
// given explicitly must exist; every error names the file.
func Load(path string, environ []string) (*Config, error) {
	if path == "" {
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, EnvPrefix+"CONFIG="); ok {
				path = v
			}
		}
	}
	c := &Config{File: path, file: koanf.New("."), env: koanf.New("."), merged: koanf.New("."), applied: map[string]string{}}
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		if err := c.file.Load(file.Provider(path), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	err := c.env.Load(env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(k, v string) (string, any) {
			if k == EnvPrefix+"CONFIG" {
				return "", nil // not a flag: it names the file
			}
			return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, EnvPrefix), "_", "-")), v
		}}), nil)
	if err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}
	if err := c.merged.Merge(c.file); err != nil {
		return nil, err
	}
	if err := c.merged.Merge(c.env); err != nil {
		return nil, err
	}
	return c, nil
}

// Check reports the file's keys that are no flag of any command (known),
// so a misspelt setting is an error instead of silently ignored.
func (c *Config) Check(known map[string]bool) error {
	var bad []string
	for _, k := range c.file.Keys() {
		if !known[k] {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("config file %s: unknown settings %s (keys are flag names, e.g. max-parallel)", c.File, strings.Join(bad, ", "))
	}
	return nil
}

// Apply sets every flag of fs not given on the command line from the
// environment or, failing that, the file. A value the flag rejects is an
// error naming where it came from.
func (c *Config) Apply(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		// help and version are actions, not settings: REPLAYCTL_VERSION
		// must not turn every command into --version.
		if f.Changed || f.Name == "help" || f.Name == "version" || !c.merged.Exists(f.Name) {
			return
		}
		where := c.origin(f.Name)
		for _, v := range c.values(f) {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: --%s %q: %w", where, f.Name, v, err))
				return
			}
		}
		f.Changed = true
		c.applied[f.Name] = FromFile
		if c.env.Exists(f.Name) {
			c.applied[f.Name] = FromEnv
		}
	})
	return errors.Join(errs...)
}

func (c *Config) origin(name string) string {
	if c.env.Exists(name) {
		return EnvName(name)
	}
	return "config file " + c.File
}

// values are a setting's values as flag arguments: a YAML list or, for a
// repeatable flag from the environment, a comma-separated list.
func (c *Config) values(f *pflag.Flag) []string {
	repeatable := strings.HasSuffix(f.Value.Type(), "Slice") || strings.HasSuffix(f.Value.Type(), "Array")
	if c.env.Exists(f.Name) {
		v := c.env.String(f.Name)
		if repeatable {
			return strings.Split(v, ",")
		}
		return []string{v}
	}
	if repeatable {
		return c.merged.Strings(f.Name)
	}
	return []string{c.merged.String(f.Name)}
}

// Setting is one flag's effective value and where it came from.
type Setting struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Origin string `json:"origin"`
}

// Effective lists fs's flags with their values after Apply, secrets
// redacted, sorted by name.
func Effective(fs *pflag.FlagSet, c *Config) []Setting {
	var out []Setting
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		s := Setting{Name: f.Name, Value: Redact(f.Name, f.Value.String()), Origin: FromDefault}
		switch {
		case c != nil && c.applied[f.Name] != "":
			s.Origin = c.applied[f.Name]
		case f.Changed:
			s.Origin = FromFlag
		}
		out = append(out, s)
	})
	slices.SortFunc(out, func(a, b Setting) int { return strings.Compare(a.Name, b.Name) })
	return out
}

var urlPassword = regexp.MustCompile(`(://[^/:@\s,]*:)[^@/\s,]+@`)

// Redact hides secrets: a setting named like one (token, *password*,
// *secret*) entirely, and the password of any URL in a value.
func Redact(name, value string) string {
	if value == "" {
		return value
	}
	// A webhook URL (notify-*) is its own credential.
	if name == "token" || strings.HasPrefix(name, "notify-") || strings.Contains(name, "password") || strings.Contains(name, "secret") {
		return "REDACTED"
	}
	// Any URL's password, wherever it sits (a source spec embeds a URL).
	return urlPassword.ReplaceAllString(value, "${1}REDACTED@")
}
