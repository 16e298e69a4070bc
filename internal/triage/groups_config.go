package triage

import (
	"gopkg.in/yaml.v3"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/group"
)

// GroupRules configure how entries are put in failure groups (rules.yaml):
//
//	groups:
//	  stack_frames: 3     # top stack frames in the signature (-1: none; default 3)
//	  ignore_topic: false # true: one group per cause across topics
//
// The runner records the group of every entry it decides under these
// rules (store.EntryRecord.Group), so the store's index, `groups list` and
// the holds all use the same signature.
type GroupRules struct {
	StackFrames *int `yaml:"stack_frames"`
	IgnoreTopic bool `yaml:"ignore_topic"`

	lines map[string]int
}

// maxStackFrames bounds stack_frames: a signature of a whole stack would
// split one cause by the caller.
const maxStackFrames = 20

// UnmarshalYAML checks keys strictly.
func (g *GroupRules) UnmarshalYAML(n *yaml.Node) error {
	type plain GroupRules
	lines, err := strictDecode(n, (*plain)(g))
	g.lines = lines
	return err
}

func (g *GroupRules) validate(cerr *ConfigError, file string, top *yaml.Node) {
	if g == nil || g.StackFrames == nil {
		return
	}
	if n := *g.StackFrames; n < -1 || n > maxStackFrames {
		line, ok := g.lines["stack_frames"]
		if !ok {
			line = keyLine(top, "groups")
		}
		cerr.add(file, line, "groups.stack_frames must be from -1 (none) to %d, got %d", maxStackFrames, n)
	}
}

// GroupOptions are the signature options the rules ask for.
func (r *Rules) GroupOptions() group.Options {
	if r == nil || r.Groups == nil {
		return group.Default
	}
	o := group.Options{IgnoreTopic: r.Groups.IgnoreTopic}
	if r.Groups.StackFrames != nil {
		o.StackFrames = *r.Groups.StackFrames
		if o.StackFrames == 0 {
			o.StackFrames = -1 // 0 written out means none
		}
	}
	return o
}

// CustomGroups reports whether the rules change the default signature.
func (r *Rules) CustomGroups() bool { return r.GroupOptions() != group.Default }

// GroupOf is e's failure group classified as class, under the rules.
func (r *Rules) GroupOf(e *entry.Entry, class Class) group.Key {
	return r.GroupOptions().Of(e, string(class))
}

// PlanApprovalOver is how many replays to target one bulk replay may send
// without an approved plan (0: any number): the target's
// plan_approval_over, else the defaults'.
func (r *Rules) PlanApprovalOver(target string) int {
	if r == nil {
		return 0
	}
	for i := range r.Targets {
		if t := &r.Targets[i]; t.TargetName() == target && t.PlanApprovalOver != nil {
			return max(0, *t.PlanApprovalOver)
		}
	}
	if r.Defaults.PlanApprovalOver != nil {
		return max(0, *r.Defaults.PlanApprovalOver)
	}
	return 0
}
