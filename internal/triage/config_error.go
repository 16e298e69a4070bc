package triage

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Problem is one thing wrong in a configuration file.
type Problem struct {
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
	Msg  string `json:"message"`
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return p.File + ": " + p.Msg
}

// ConfigError lists every problem found in a rules file or policy
// directory, each with file and line, so that one run shows them all.
type ConfigError struct {
	Problems []Problem
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

func (e *ConfigError) add(file string, line int, format string, args ...any) {
	e.Problems = append(e.Problems, Problem{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (e *ConfigError) orNil() error {
	if e == nil || len(e.Problems) == 0 {
		return nil
	}
	return e
}

var (
	yamlLineRe = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	// yaml.v3 names Go types in its messages; users know the file, not our types.
	yamlTypeRe = regexp.MustCompile(` (?:in|into) (?:type )?[\[\]\*\w.]+$`)
)

// addYAML turns a yaml.v3 message ("line 3: field x not found in type ...")
// into a Problem of file.
func (e *ConfigError) addYAML(file, msg string) {
	msg = strings.TrimSpace(msg)
	line := 0
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	if strings.HasPrefix(msg, "field ") && strings.Contains(msg, " not found") {
		name := strings.TrimPrefix(msg, "field ")
		name = name[:strings.Index(name, " not found")]
		msg = fmt.Sprintf("unknown field %q", name)
	} else {
		msg = yamlTypeRe.ReplaceAllString(msg, "")
	}
	e.add(file, line, "%s", msg)
}
