package scenarios

import (
	"reflect"

	"go.yaml.in/yaml/v3"
)

// What scenarios/clusterimport reads through the loader, so that a
// scenario it writes meets the same checks and messages as any other.

// ConfigMode reads the mode (defaulted) of the kube-proxy configuration rel,
// relative to the OS folder dir, for the scenario file, with the loader's
// checks and messages (strict refuses what kube-proxy reads only
// leniently).
func ConfigMode(file, dir, rel string, strict bool) (string, error) {
	d := &decoder{file: file, strict: strict}
	ref := &yaml.Node{Kind: yaml.ScalarNode, Value: rel, Line: 1, Column: 1}
	c := readKubeProxyConfig(d, &Scenario{File: file, folder: osFolder(dir)}, nil, ref)
	if len(d.problems) > 0 || c == nil {
		return "", d.problems
	}
	return string(c.Config.Mode), nil
}

// ParseIn parses a scenario held in memory as file, whose files are read
// from the OS folder dir as Load reads them.
func ParseIn(file string, data []byte, dir string, o LoadOptions) (*Scenario, error) {
	return parse(file, data, osFolder(dir), "", o)
}

// SettingsKeys lists the proxy keys a mode's own settings hold.
func SettingsKeys(m Mode) []string { return keysOf(reflect.TypeOf(m.NewSettings())) }

// OrList writes "a, b or c", as the loader's messages do.
func OrList(words []string) string { return orList(words) }

// PlainNonString reports whether a plain YAML scalar might resolve to
// something other than a string (a number, a boolean, null), so that a
// string written so must be quoted.
func PlainNonString(v []byte) bool { return plainNonString(v) }
