package costprofile

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// builtin are the profiles shipped with proxysim, by name; each parsed once.
var (
	builtinOnce sync.Once
	builtin     map[string]*Profile
	builtinErr  error
)

// Named is a built-in profile by name: "default" is the one measured on
// this project's machine (see docs/cost-profiles.md). The profile is shared:
// read it, never change it.
func Named(name string) (*Profile, error) {
	builtinOnce.Do(loadBuiltin)
	if builtinErr != nil {
		return nil, builtinErr
	}
	p, ok := builtin[name]
	if !ok {
		var names []string
		for n := range builtin {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("no built-in cost profile %q (built in: %s; or name a .json file relative to the scenario)", name, strings.Join(names, ", "))
	}
	return p, nil
}
