package costprofile

import (
	"embed"
	"fmt"
	"path"
	"strings"
)

// profiles are the built-in profiles, one file each, named after the
// profile: profiles/default.json is `profile: default`.
//
//go:embed profiles/*.json
var profiles embed.FS

func loadBuiltin() {
	builtin = map[string]*Profile{}
	files, err := profiles.ReadDir("profiles")
	if err != nil {
		builtinErr = err
		return
	}
	for _, f := range files {
		data, err := profiles.ReadFile(path.Join("profiles", f.Name()))
		if err != nil {
			builtinErr = err
			return
		}
		p, err := Parse(data)
		if err != nil {
			builtinErr = fmt.Errorf("built-in profile %s: %w", f.Name(), err)
			return
		}
		if want := strings.TrimSuffix(f.Name(), ".json"); p.Name != want {
			builtinErr = fmt.Errorf("built-in profile %s is named %q", f.Name(), p.Name)
			return
		}
		builtin[p.Name] = p
	}
}
