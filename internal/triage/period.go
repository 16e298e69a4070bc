package triage

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Period is a rules.yaml duration that also takes whole days ("90d"), the
// unit retention and history windows are thought in.
type Period time.Duration

// ParsePeriod reads "90d", or a Go duration such as "36h".
func ParsePeriod(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("period %q: want a number of days such as 30d, or a duration such as 36h", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("period %q: want a number of days such as 30d, or a duration such as 36h", s)
	}
	return d, nil
}

// UnmarshalYAML accepts what ParsePeriod does.
func (p *Period) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return typeErr(n.Line, "expected a period such as 90d, got a %s", kindName(n))
	}
	d, err := ParsePeriod(n.Value)
	if err != nil {
		return typeErr(n.Line, "%v", err)
	}
	*p = Period(d)
	return nil
}

// String writes whole days as "Nd".
func (p Period) String() string {
	d := time.Duration(p)
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return shortDuration(d)
}
