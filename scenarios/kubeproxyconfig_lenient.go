package scenarios

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
	kpv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
)

// kube-proxy reads its configuration strictly first and, when that fails
// only for strictness (an unknown or a duplicated field), a second time
// leniently, logs the strict error and runs (kubernetes v1.36
// cmd/kube-proxy/app/options.go, Options.loadConfig and
// newLenientSchemeAndCodecs). proxysim does the same unless --strict, and
// turns the log line kube-proxy writes into a warning per field: a typo
// kube-proxy ignores silently is a setting the cluster never got.

// lenientField is one field that strict decoding refuses and lenient
// decoding passes over.
type lenientField struct {
	at   *yaml.Node // the key, at its place in the file
	path string
	// strict is the problem as --strict reports it; lenient is the same as
	// a warning, saying what kube-proxy runs with instead.
	strict, lenient string
}

// configIsJSON reports whether kube-proxy reads text as JSON: its decoder
// takes a document that starts with "{" for JSON and anything else for
// YAML (k8s.io/apimachinery runtime/serializer/json Serializer.RecognizesData,
// util/yaml IsJSONBuffer). The two keep different values of a duplicated
// field.
func configIsJSON(text []byte) bool {
	t := bytes.TrimLeftFunc(text, unicode.IsSpace)
	return len(t) > 0 && t[0] == '{'
}

// duplicateField is a mapping key given again.
type duplicateField struct {
	path       string
	key, first *yaml.Node
}

// duplicateFields lists every key given more than once, at any depth, at
// its repeats.
func duplicateFields(n *yaml.Node, prefix string) []duplicateField {
	var out []duplicateField
	switch n.Kind {
	case yaml.MappingNode:
		first := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p := join(prefix, k.Value)
			if f, ok := first[k.Value]; ok {
				out = append(out, duplicateField{path: p, key: k, first: f})
			} else {
				first[k.Value] = k
			}
			out = append(out, duplicateFields(n.Content[i+1], p)...)
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			out = append(out, duplicateFields(e, fmt.Sprintf("%s[%d]", prefix, i))...)
		}
	}
	return out
}

// keepLastDuplicates drops the earlier values of every duplicated key, at
// any depth: YAML's lenient reading keeps the last value whole, a mapping
// included (sigs.k8s.io/yaml YAMLToJSON, whose go-yaml v2 decoder sets a
// map entry once per key, the later over the earlier).
func keepLastDuplicates(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		last := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			last[n.Content[i].Value] = i
		}
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			if last[n.Content[i].Value] == i {
				kept = append(kept, n.Content[i], n.Content[i+1])
			}
		}
		n.Content = kept
		for i := 1; i < len(n.Content); i += 2 {
			keepLastDuplicates(n.Content[i])
		}
	case yaml.SequenceNode:
		for _, e := range n.Content {
			keepLastDuplicates(e)
		}
	}
}

// duplicateLenient words a duplicated field for both readings.
func duplicateLenient(dup duplicateField, asJSON bool) lenientField {
	what := fmt.Sprintf("field %q given twice (first at line %d)", lastSegment(dup.path), dup.first.Line)
	keeps := "kube-proxy decodes the file leniently and runs with the last value, dropping the first"
	if asJSON {
		// encoding/json decodes each occurrence in turn into the same
		// field: a later object's fields go over the earlier's.
		keeps = "kube-proxy decodes the JSON file leniently, this value over the first: an object's fields merge into the first's"
	}
	return lenientField{at: dup.key, path: dup.path,
		strict:  what + ": refused by --strict (" + keeps + ")",
		lenient: what + ": " + keeps + " (--strict refuses it)"}
}

// unknownLenient words an unknown field for both readings, with the known
// field it most likely misspells.
func unknownLenient(root *yaml.Node, path string) lenientField {
	what := fmt.Sprintf("unknown field %q in KubeProxyConfiguration (%s)", lastSegment(path), kpv1alpha1.SchemeGroupVersion)
	var hint string
	if s := suggestConfigField(path); s != "" {
		hint = "; did you mean " + s + "?"
	}
	const runs = "kube-proxy decodes the file leniently and runs without it"
	return lenientField{at: findPath(root, path), path: path,
		strict:  what + ": refused by --strict (" + runs + ")" + hint,
		lenient: what + ": " + runs + " (--strict refuses it)" + hint}
}

var configType = reflect.TypeOf(kpv1alpha1.KubeProxyConfiguration{})

var jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// configFields are the JSON field names of a configuration type and their
// types, embedded structs' fields promoted; nil for a type that is not a
// struct of fields (a map, a scalar, a type that decodes itself such as
// metav1.Duration).
func configFields(t reflect.Type) map[string]reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil
	}
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "" && f.Anonymous:
			for k, v := range configFields(f.Type) {
				out[k] = v
			}
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}

// suggestConfigField names the field an unknown one likely means: the
// closest by edit distance among its siblings, else the fields of the same
// name elsewhere in the configuration (syncPeriod given at the top, as the
// internal type and v1alpha2 have it, belongs to a mode's section in
// v1alpha1); "" if none.
func suggestConfigField(path string) string {
	name := lastSegment(path)
	t := configType
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		for _, seg := range strings.Split(path[:i], ".") {
			seg, _, _ = strings.Cut(seg, "[")
			ft, ok := configFields(t)[seg]
			if !ok {
				return ""
			}
			t = ft
		}
	}
	siblings := slices.Sorted(func(yield func(string) bool) {
		for k := range configFields(t) {
			if !yield(k) {
				return
			}
		}
	})
	best, bestD := "", 3
	for _, s := range siblings {
		if d := editDistance(strings.ToLower(name), strings.ToLower(s)); d < bestD {
			best, bestD = s, d
		}
	}
	if best != "" {
		return fmt.Sprintf("%q", best)
	}
	var elsewhere []string
	var walk func(t reflect.Type, prefix string, depth int)
	walk = func(t reflect.Type, prefix string, depth int) {
		for k, ft := range configFields(t) {
			p := join(prefix, k)
			if strings.EqualFold(k, name) && p != path {
				elsewhere = append(elsewhere, fmt.Sprintf("%q", p))
			}
			if depth < 4 {
				walk(ft, p, depth+1)
			}
		}
	}
	walk(configType, "", 0)
	slices.Sort(elsewhere)
	return orList(elsewhere)
}
