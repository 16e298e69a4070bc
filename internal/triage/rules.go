package triage

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gobwas/glob"
	"gopkg.in/yaml.v3"
)

// DefaultMaxReplays applies when neither a rule nor the defaults set one.
const DefaultMaxReplays = 3

// Rules is a decoded, validated rules.yaml. The file shape is the one DLQ
// rule files share (version: v1, dlq_rules with match/action/...), extended with optional
// sections; decoding is strict (unknown keys are errors).
type Rules struct {
	Version  string              `yaml:"version"`
	Defaults Defaults            `yaml:"defaults"`
	Taxonomy map[string][]string `yaml:"taxonomy"`
	Patterns []Pattern           `yaml:"patterns"`
	DLQRules []Rule              `yaml:"dlq_rules"`
	Targets  []Target            `yaml:"targets"`
	// Retention says how long closed entries are kept (retention.go).
	Retention Retention `yaml:"retention"`
	// Groups configure the failure signature (groups_config.go).
	Groups *GroupRules `yaml:"groups"`

	file     string
	taxonomy map[string]Class
	patterns []Pattern // the file's, then the built-in ones
}

// Defaults apply to every rule that does not say otherwise.
type Defaults struct {
	MaxReplays    *int     `yaml:"max_replays"`
	Backoff       *Backoff `yaml:"backoff"`
	Owner         string   `yaml:"owner"`
	ApproverGroup string   `yaml:"approver_group"`
	// PlanApprovalOver: a bulk replay sending more entries than this to
	// one target needs an approved plan (0 or unset: never; groups_config.go).
	PlanApprovalOver *int `yaml:"plan_approval_over"`

	lines map[string]int
}

// Rule is one entry of dlq_rules. The first rule whose match holds wins.
type Rule struct {
	Name          string   `yaml:"name"`
	Match         Match    `yaml:"match"`
	Action        string   `yaml:"action"`
	MaxReplays    *int     `yaml:"max_replays"`
	Backoff       *Backoff `yaml:"backoff"`
	Owner         string   `yaml:"owner"`
	ApproverGroup string   `yaml:"approver_group"`

	line     int
	lines    map[string]int
	action   Action
	problems []string
}

// Match is the condition of a rule; every field set must hold.
type Match struct {
	ReasonCode  StringList        `yaml:"reason_code"`
	Class       StringList        `yaml:"class"`
	Topic       StringList        `yaml:"topic"` // globs; '.' separates segments, '**' crosses them
	Source      StringList        `yaml:"source"`
	MinAttempts *int              `yaml:"min_attempts"`
	MaxAttempts *int              `yaml:"max_attempts"`
	Labels      map[string]string `yaml:"labels"`

	lines  map[string]int
	topics []*glob.Pattern
}

// Backoff configures replay retries; in rules.yaml it is either a strategy
// name ("backoff: exponential_jitter") or a mapping.
type Backoff struct {
	Strategy   string        `yaml:"strategy"`
	Initial    time.Duration `yaml:"initial"`
	Max        time.Duration `yaml:"max"`
	Multiplier float64       `yaml:"multiplier"`

	line int
}

// Backoff strategies.
const (
	BackoffExponentialJitter = "exponential_jitter"
	BackoffExponential       = "exponential"
	BackoffConstant          = "constant"
)

// DefaultBackoff is used when neither a rule nor the defaults set one.
func DefaultBackoff() Backoff {
	return Backoff{Strategy: BackoffExponentialJitter, Initial: time.Second, Max: 30 * time.Second, Multiplier: 2}
}

// Target says where replays of matching entries go (used by the replay
// runner; declared here because it lives in rules.yaml).
type Target struct {
	Name  string      `yaml:"name"`
	Match TargetMatch `yaml:"match"`
	HTTP  *HTTPTarget `yaml:"http"`
	Exec  *ExecTarget `yaml:"exec"`
	// native replays through a system's own endpoint, under the key
	// naming the system (a registered native kind, RegisterSystems).
	native map[string]*NativeTarget
	// PlanApprovalOver overrides the default's for this target.
	PlanApprovalOver *int `yaml:"plan_approval_over"`
	line             int
	lines            map[string]int
	topic            []*glob.Pattern
	problems         []string

	// KeyLifetime is how long the target honours an idempotency key (Stripe
	// may prune keys after 24h); 0: for ever. An entry older than this is not
	// replayed automatically (see keyLifetimeExceeded).
	KeyLifetime time.Duration `yaml:"key_lifetime"`
}

// TargetMatch selects entries for a target.
type TargetMatch struct {
	Topic  StringList `yaml:"topic"`
	Source StringList `yaml:"source"`
}

// HTTPTarget POSTs the payload to URL; Probe (optional) is a URL answering
// GET with the idempotency key whether the key was committed.
type HTTPTarget struct {
	URL     string            `yaml:"url"`
	Probe   string            `yaml:"probe"`
	Timeout time.Duration     `yaml:"timeout"`
	Headers map[string]string `yaml:"headers"`
}

// Native is the target's replay through a system's own endpoint: the
// rules.yaml key naming the system (a --target SYSTEM:URL kind) and its
// settings, or "" and nil for an http or exec target.
func (t *Target) Native() (kind string, nt *NativeTarget) {
	for _, k := range slices.Sorted(maps.Keys(t.native)) {
		return k, t.native[k]
	}
	return "", nil
}

// NativeTarget is a system's own replay endpoint, its base URL; credentials
// come from the environment, never from rules.yaml.
type NativeTarget struct {
	URL     string        `yaml:"url"`
	Timeout time.Duration `yaml:"timeout"`
}

// UnmarshalYAML checks keys strictly.
func (t *NativeTarget) UnmarshalYAML(n *yaml.Node) error {
	type plain NativeTarget
	_, err := strictDecode(n, (*plain)(t))
	return err
}

// ExecTarget runs Command with the payload on stdin, or, with stdin:
// entry, a JSON object naming the entry (its id, ref, source, what its
// system adds, such as a job id, repo and item path, key, attempt) with the
// payload in it.
type ExecTarget struct {
	Command []string      `yaml:"command"`
	Timeout time.Duration `yaml:"timeout"`
	Stdin   string        `yaml:"stdin"`
}

// StringList is a YAML scalar or a sequence of scalars.
type StringList []string

// UnmarshalYAML accepts "x" and ["x", "y"].
func (s *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*s = StringList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return typeErr(c.Line, "expected a string, got a %s", kindName(c))
			}
			out = append(out, c.Value)
		}
		*s = out
		return nil
	}
	return typeErr(n.Line, "expected a string or a list of strings, got a %s", kindName(n))
}

// UnmarshalYAML checks keys strictly and remembers lines for validation.
func (r *Rule) UnmarshalYAML(n *yaml.Node) error {
	type plain Rule
	lines, err := strictDecode(n, (*plain)(r))
	r.line, r.lines = n.Line, lines
	return keepElement(err, &r.problems)
}

// UnmarshalYAML checks keys strictly.
func (m *Match) UnmarshalYAML(n *yaml.Node) error {
	type plain Match
	lines, err := strictDecode(n, (*plain)(m))
	m.lines = lines
	return err
}

// UnmarshalYAML checks keys strictly.
func (t *Target) UnmarshalYAML(n *yaml.Node) error {
	type plain Target
	_, native := registeredSystems()
	lines, err := strictDecode(n, (*plain)(t), native...)
	t.line, t.lines = n.Line, lines
	// A native target's key is the system's (strictDecode took it as
	// known); its settings decode strictly as the other keys' do.
	var problems []string
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if !slices.Contains(native, k) {
			continue
		}
		var nt NativeTarget
		if derr := n.Content[i+1].Decode(&nt); derr != nil {
			var te *yaml.TypeError
			if !errors.As(derr, &te) {
				return derr
			}
			problems = append(problems, te.Errors...)
		}
		if t.native == nil {
			t.native = map[string]*NativeTarget{}
		}
		t.native[k] = &nt
	}
	if len(problems) > 0 {
		var te *yaml.TypeError
		switch {
		case errors.As(err, &te):
			te.Errors = append(te.Errors, problems...)
		case err == nil:
			err = &yaml.TypeError{Errors: problems}
		}
	}
	return keepElement(err, &t.problems)
}

// UnmarshalYAML checks keys strictly.
func (t *TargetMatch) UnmarshalYAML(n *yaml.Node) error {
	type plain TargetMatch
	_, err := strictDecode(n, (*plain)(t))
	return err
}

// UnmarshalYAML checks keys strictly.
func (t *HTTPTarget) UnmarshalYAML(n *yaml.Node) error {
	type plain HTTPTarget
	_, err := strictDecode(n, (*plain)(t))
	return err
}

// UnmarshalYAML checks keys strictly.
func (t *ExecTarget) UnmarshalYAML(n *yaml.Node) error {
	type plain ExecTarget
	_, err := strictDecode(n, (*plain)(t))
	return err
}

// UnmarshalYAML checks keys strictly.
func (d *Defaults) UnmarshalYAML(n *yaml.Node) error {
	type plain Defaults
	lines, err := strictDecode(n, (*plain)(d))
	d.lines = lines
	return err
}

// UnmarshalYAML checks keys strictly and remembers its line.
func (p *Pattern) UnmarshalYAML(n *yaml.Node) error {
	type plain Pattern
	_, err := strictDecode(n, (*plain)(p))
	p.line = n.Line
	return keepElement(err, &p.problems)
}

// UnmarshalYAML accepts a strategy name or a mapping.
func (b *Backoff) UnmarshalYAML(n *yaml.Node) error {
	b.line = n.Line
	if n.Kind == yaml.ScalarNode {
		b.Strategy = n.Value
		return nil
	}
	type plain Backoff
	_, err := strictDecode(n, (*plain)(b))
	return err
}

// keepElement stashes a list element's decode problems and reports success,
// so that yaml.v3 keeps the element and validation can still report what
// else is wrong with it (yaml.v3 drops an element whose decode failed).
func keepElement(err error, problems *[]string) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		*problems = te.Errors
		return nil
	}
	return err
}

func typeErr(line int, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", line, fmt.Sprintf(format, args...))}}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "scalar"
}

// strictDecode decodes mapping n into out (a pointer to a struct with yaml
// tags), reporting unknown and repeated keys as *yaml.TypeError so that
// yaml.v3 keeps decoding and collects every problem. It returns the line of
// each key. (yaml.v3 drops KnownFields inside custom unmarshalers, hence this.)
func strictDecode(n *yaml.Node, out any, extra ...string) (map[string]int, error) {
	if n.Kind != yaml.MappingNode {
		return nil, typeErr(n.Line, "expected a mapping, got a %s", kindName(n))
	}
	known := yamlFields(reflect.TypeOf(out).Elem())
	for _, k := range extra {
		known[k] = struct{}{}
	}
	var problems []string
	lines := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if _, ok := known[k.Value]; !ok {
			problems = append(problems, fmt.Sprintf("line %d: unknown field %q (want one of %s)", k.Line, k.Value, strings.Join(sortedKeys(known), ", ")))
			continue
		}
		if _, dup := lines[k.Value]; dup {
			problems = append(problems, fmt.Sprintf("line %d: field %q given twice", k.Line, k.Value))
		}
		lines[k.Value] = k.Line
	}
	if err := n.Decode(out); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return lines, err
		}
		problems = append(problems, te.Errors...)
	}
	if len(problems) > 0 {
		return lines, &yaml.TypeError{Errors: problems}
	}
	return lines, nil
}

func yamlFields(t reflect.Type) map[string]struct{} {
	out := map[string]struct{}{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = struct{}{}
	}
	return out
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// LoadRules reads, strictly decodes and validates a rules file. Every
// problem is reported, each with file:line, in one *ConfigError.
func LoadRules(path string) (*Rules, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read rules: %w", err)
	}
	r, err := ParseRules(path, data)
	return r, data, err
}

// ParseRules decodes and validates rules.yaml content; name is used in
// messages.
func ParseRules(name string, data []byte) (*Rules, error) {
	r := &Rules{file: name}
	cerr := &ConfigError{}
	if len(bytes.TrimSpace(data)) == 0 {
		cerr.add(name, 0, "empty rules file (want at least `version: v1`)")
		return nil, cerr
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		cerr.addYAML(name, err.Error())
		return nil, cerr
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		cerr.add(name, doc.Line, "rules file must be a mapping with version and dlq_rules")
		return nil, cerr
	}
	type plain Rules
	if _, err := strictDecode(doc.Content[0], (*plain)(r)); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			cerr.addYAML(name, err.Error())
			return nil, cerr
		}
		for _, m := range te.Errors {
			cerr.addYAML(name, m)
		}
	}
	r.validate(cerr, doc.Content[0])
	reportTypes(cerr, name, doc.Content[0])
	sort.SliceStable(cerr.Problems, func(i, j int) bool { return cerr.Problems[i].Line < cerr.Problems[j].Line })
	if err := cerr.orNil(); err != nil {
		return nil, err
	}
	return r, nil
}

func keyLine(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i].Line
		}
	}
	return m.Line
}

func (r *Rules) validate(cerr *ConfigError, top *yaml.Node) {
	f := r.file
	if r.Version != "v1" {
		cerr.add(f, keyLine(top, "version"), "version: %q is not supported (want v1)", r.Version)
	}
	if r.Defaults.MaxReplays != nil && *r.Defaults.MaxReplays < 0 {
		line, ok := r.Defaults.lines["max_replays"]
		if !ok {
			line = keyLine(top, "defaults")
		}
		cerr.add(f, line, "defaults.max_replays must be >= 0")
	}
	if r.Defaults.Backoff != nil {
		r.Defaults.Backoff.validate(cerr, f, "defaults.backoff")
	}
	r.Groups.validate(cerr, f, top)

	r.taxonomy = builtinTaxonomy()
	classes := make([]string, 0, len(r.Taxonomy))
	for class := range r.Taxonomy {
		classes = append(classes, class)
	}
	sort.Strings(classes) // map order is random; problems and results must not be
	listed := map[string]string{}
	for _, class := range classes {
		c, err := ParseClass(class)
		if strings.EqualFold(strings.TrimSpace(class), string(classGeneric)) {
			// Codes that say nothing: the status and the message decide.
			c, err = classGeneric, nil
		}
		if err != nil {
			cerr.add(f, keyLine(top, "taxonomy"), "taxonomy: %v", err)
			continue
		}
		for _, code := range r.Taxonomy[class] {
			code = strings.ToLower(strings.TrimSpace(code))
			if prev, dup := listed[code]; dup && prev != class {
				cerr.add(f, keyLine(top, "taxonomy"), "taxonomy: code %q is listed under both %s and %s", code, prev, class)
				continue
			}
			listed[code] = class
			r.taxonomy[code] = c
		}
	}

	r.patterns = r.patterns[:0]
	for i := range r.Patterns {
		p := r.Patterns[i]
		where := fmt.Sprintf("patterns[%d]", i)
		for _, m := range p.problems {
			cerr.addYAML(f, m)
		}
		c, err := ParseClass(p.Class)
		if err != nil {
			cerr.add(f, p.line, "%s.class: %v", where, err)
		}
		p.class = c
		switch {
		case (p.Contains == "") == (p.Regex == ""):
			cerr.add(f, p.line, "%s: set exactly one of contains or regex", where)
		case p.Regex != "":
			re, err := regexp.Compile("(?i)" + p.Regex)
			if err != nil {
				cerr.add(f, p.line, "%s.regex: %v", where, err)
			}
			p.re = re
		default:
			p.lower = strings.ToLower(p.Contains)
		}
		r.patterns = append(r.patterns, p)
	}
	r.patterns = append(r.patterns, builtinPatterns()...)

	r.Retention.validate(cerr, f, keyLine(top, "retention"))
	for i := range r.DLQRules {
		r.DLQRules[i].validate(cerr, f, i)
	}
	names := map[string]int{}
	for i := range r.Targets {
		t := &r.Targets[i]
		t.validate(cerr, f, i)
		if t.Name != "" {
			if prev, dup := names[t.Name]; dup {
				cerr.add(f, t.line, "targets[%d].name: %q already used by targets[%d]", i, t.Name, prev)
			}
			names[t.Name] = i
		}
	}
}

func (rl *Rule) validate(cerr *ConfigError, f string, i int) {
	where := fmt.Sprintf("dlq_rules[%d]", i)
	for _, m := range rl.problems {
		cerr.addYAML(f, m)
	}
	line := func(field string) int {
		if l, ok := rl.lines[field]; ok {
			return l
		}
		return rl.line
	}
	if rl.Action == "" {
		cerr.add(f, rl.line, "%s: action is required", where)
	} else if a, err := ParseAction(rl.Action); err != nil {
		cerr.add(f, line("action"), "%s.action: %v", where, err)
	} else {
		rl.action = a
	}
	if rl.MaxReplays != nil && *rl.MaxReplays < 0 {
		cerr.add(f, line("max_replays"), "%s.max_replays must be >= 0", where)
	}
	if rl.Backoff != nil {
		rl.Backoff.validate(cerr, f, where+".backoff")
	}
	rl.Match.validate(cerr, f, where+".match", line("match"))
}

func (m *Match) validate(cerr *ConfigError, f, where string, line int) {
	at := func(field string) int {
		if l, ok := m.lines[field]; ok {
			return l
		}
		return line
	}
	for _, c := range m.Class {
		if _, err := ParseClass(c); err != nil {
			cerr.add(f, at("class"), "%s.class: %v", where, err)
		}
	}
	for _, s := range m.Source {
		if !knownSource(s) {
			sources, _ := registeredSystems()
			cerr.add(f, at("source"), "%s.source: unknown source kind %q (want %s)", where, s, oneOf(sources))
		}
	}
	m.topics = compileGlobs(cerr, f, at("topic"), where+".topic", m.Topic)
	if m.MinAttempts != nil && m.MaxAttempts != nil && *m.MinAttempts > *m.MaxAttempts {
		cerr.add(f, at("max_attempts"), "%s: min_attempts %d > max_attempts %d", where, *m.MinAttempts, *m.MaxAttempts)
	}
}

func (b *Backoff) validate(cerr *ConfigError, f, where string) {
	switch b.Strategy {
	case "", BackoffExponentialJitter, BackoffExponential, BackoffConstant:
	default:
		cerr.add(f, b.line, "%s: unknown strategy %q (want exponential_jitter, exponential or constant)", where, b.Strategy)
	}
	if b.Initial < 0 || b.Max < 0 {
		cerr.add(f, b.line, "%s: intervals must be positive", where)
	}
	if b.Initial > 0 && b.Max > 0 && b.Initial > b.Max {
		cerr.add(f, b.line, "%s: initial %s is larger than max %s", where, b.Initial, b.Max)
	}
	if b.Multiplier != 0 && b.Multiplier < 1 {
		cerr.add(f, b.line, "%s: multiplier must be >= 1", where)
	}
}

func (t *Target) validate(cerr *ConfigError, f string, i int) {
	where := fmt.Sprintf("targets[%d]", i)
	for _, m := range t.problems {
		cerr.addYAML(f, m)
	}
	kinds := len(t.native)
	for _, set := range []bool{t.HTTP != nil, t.Exec != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		_, native := registeredSystems()
		cerr.add(f, t.line, "%s: set exactly one of %s", where, oneOf(append([]string{"http", "exec"}, native...)))
	}
	for _, key := range slices.Sorted(maps.Keys(t.native)) {
		if n := t.native[key]; !strings.HasPrefix(n.URL, "http://") && !strings.HasPrefix(n.URL, "https://") {
			cerr.add(f, t.lines[key], "%s.%s.url: %q is not an http(s) URL", where, key, n.URL)
		}
	}
	if t.HTTP != nil {
		if !strings.HasPrefix(t.HTTP.URL, "http://") && !strings.HasPrefix(t.HTTP.URL, "https://") {
			cerr.add(f, t.lines["http"], "%s.http.url: %q is not an http(s) URL", where, t.HTTP.URL)
		}
		if t.HTTP.Probe != "" && !strings.HasPrefix(t.HTTP.Probe, "http://") && !strings.HasPrefix(t.HTTP.Probe, "https://") {
			cerr.add(f, t.lines["http"], "%s.http.probe: %q is not an http(s) URL", where, t.HTTP.Probe)
		}
	}
	if t.KeyLifetime < 0 {
		cerr.add(f, t.lines["key_lifetime"], "%s.key_lifetime: %s is negative (want a duration such as 24h, or leave it out)", where, shortDuration(t.KeyLifetime))
	}
	if t.Exec != nil && len(t.Exec.Command) == 0 {
		cerr.add(f, t.lines["exec"], "%s.exec.command: give the program and its arguments as a list", where)
	}
	if t.Exec != nil && t.Exec.Stdin != "" && t.Exec.Stdin != "payload" && t.Exec.Stdin != "entry" {
		cerr.add(f, t.lines["exec"], "%s.exec.stdin: %q is neither payload (the default) nor entry", where, t.Exec.Stdin)
	}
	for _, s := range t.Match.Source {
		if !knownSource(s) {
			cerr.add(f, t.lines["match"], "%s.match.source: unknown source kind %q", where, s)
		}
	}
	t.topic = compileGlobs(cerr, f, t.lines["match"], where+".match.topic", t.Match.Topic)
}

func compileGlobs(cerr *ConfigError, f string, line int, where string, pats []string) []*glob.Pattern {
	var out []*glob.Pattern
	for _, p := range pats {
		g, err := glob.Compile(p, '.')
		if err != nil {
			cerr.add(f, line, "%s: bad glob %q: %v", where, p, err)
			continue
		}
		out = append(out, g)
	}
	return out
}

func matchAny(gs []*glob.Pattern, s string) bool {
	for _, g := range gs {
		if g.Match(s) {
			return true
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(strings.TrimSpace(v), s) {
			return true
		}
	}
	return false
}
