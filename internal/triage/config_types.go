package triage

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// checkTypes walks a rules.yaml node against the Go type it decodes into
// and reports every value of the wrong type by its path, as in
// `dlq_rules[0].match.min_attempts: want an integer, got "three"`.
// yaml.v3's own message ("cannot unmarshal !!str `three` into int") names
// neither the field nor what it wants. Values checked elsewhere (StringList
// and Backoff's strategy shorthand) and mapping shape errors, which
// strictDecode reports, are left alone.
func checkTypes(n *yaml.Node, t reflect.Type, path string, report func(line int, msg string)) {
	if n == nil {
		return
	}
	if n.Kind == yaml.AliasNode {
		return // an alias decodes as its anchor, which is checked where it stands
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	want := func(what string) {
		report(n.Line, fmt.Sprintf("%s: want %s, got %s", path, what, describeNode(n)))
	}
	decodes := func() bool {
		return n.Kind == yaml.ScalarNode && n.Decode(reflect.New(t).Interface()) == nil
	}
	if t == reflect.TypeFor[time.Duration]() {
		if !decodes() {
			want("a duration such as 30s or 2m")
		}
		return
	}
	if t == reflect.TypeFor[StringList]() {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if f, ok := fieldByTag(t, k.Value); ok {
				checkTypes(v, f.Type, joinPath(path, k.Value), report)
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			want("a list")
			return
		}
		for i, c := range n.Content {
			checkTypes(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), report)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			want("a mapping")
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			checkTypes(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value), report)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !decodes() {
			want("an integer")
		}
	case reflect.Float32, reflect.Float64:
		if !decodes() {
			want("a number")
		}
	case reflect.Bool:
		if !decodes() {
			want("true or false")
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			want("a string")
		}
	}
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.IsExported() && name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// describeNode says what a value is, quoting a scalar (shortened).
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return strconv.Quote(v)
}

// reportTypes adds checkTypes' problems to cerr and drops yaml.v3's
// "cannot unmarshal" messages on the same lines, which say the same thing
// without the field's name.
func reportTypes(cerr *ConfigError, file string, top *yaml.Node) {
	typed := map[int]bool{}
	var found []Problem
	checkTypes(top, reflect.TypeFor[Rules](), "", func(line int, msg string) {
		typed[line] = true
		found = append(found, Problem{File: file, Line: line, Msg: msg})
	})
	kept := cerr.Problems[:0]
	for _, p := range cerr.Problems {
		if typed[p.Line] && strings.HasPrefix(p.Msg, "cannot unmarshal") {
			continue
		}
		kept = append(kept, p)
	}
	cerr.Problems = append(kept, found...)
}
