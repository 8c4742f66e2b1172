package scenarios

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed library
var libraryFS embed.FS

// Library is the bundled scenario library, as a file system rooted at the
// library folder.
func Library() fs.FS {
	sub, err := fs.Sub(libraryFS, "library")
	if err != nil {
		panic(err)
	}
	return sub
}

// LibraryNames lists the bundled scenarios by name (file name without .yaml),
// sorted. A scenario in a subfolder is named with its folder
// (`upstream-runner/v1.36-retry`); `manifests` folders hold objects, not
// scenarios.
func LibraryNames() []string {
	var out []string
	fs.WalkDir(Library(), ".", func(p string, e fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case e.IsDir() && e.Name() == "manifests":
			return fs.SkipDir
		case !e.IsDir() && strings.HasSuffix(p, ".yaml"):
			out = append(out, strings.TrimSuffix(p, ".yaml"))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// IsLibrary reports whether name is a bundled scenario.
func IsLibrary(name string) bool {
	for _, n := range LibraryNames() {
		if n == name {
			return true
		}
	}
	return false
}

// LoadLibrary loads a bundled scenario by name.
func LoadLibrary(name string) (*Scenario, error) {
	return LoadFS(Library(), path.Clean(name)+".yaml")
}

// ReadLibraryFile returns a bundled scenario's source.
func ReadLibraryFile(name string) ([]byte, error) { return fs.ReadFile(Library(), name) }
