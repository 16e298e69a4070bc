package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/replayctl/replayctl/internal/server"
)

// candidatesFlag is serve's --backtest-candidate NAME=RULES,POLICIES
// (repeatable): the candidate rules and policies the console's backtest
// page offers by name. A browser chooses a name, never a path.
type candidatesFlag struct{ list *[]server.BacktestCandidate }

func (f candidatesFlag) String() string {
	if f.list == nil {
		return ""
	}
	var out []string
	for _, c := range *f.list {
		out = append(out, c.Name+"="+c.Rules+","+c.Policies)
	}
	return strings.Join(out, " ")
}

func (f candidatesFlag) Set(v string) error {
	name, files, ok := strings.Cut(v, "=")
	rules, policies, _ := strings.Cut(files, ",")
	name, rules, policies = strings.TrimSpace(name), strings.TrimSpace(rules), strings.TrimSpace(policies)
	if !ok || name == "" || rules == "" {
		return fmt.Errorf("want NAME=RULES_FILE[,POLICY_DIR], e.g. next=rules.next.yaml,policies.next")
	}
	for _, c := range *f.list {
		if c.Name == name {
			return fmt.Errorf("candidate %q given twice", name)
		}
	}
	for _, p := range []string{rules, policies} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("candidate %s: %w", name, err)
		}
	}
	*f.list = append(*f.list, server.BacktestCandidate{Name: name, Rules: abs(rules), Policies: absOrEmpty(policies)})
	return nil
}

func (candidatesFlag) Type() string { return "NAME=RULES,POLICIES" }

func absOrEmpty(p string) string {
	if p == "" {
		return ""
	}
	return abs(p)
}
