package scenarios

import (
	"embed"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
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

// LargeTag marks a bundled scenario too big for the test suites (the
// 5,000-node cl2-load-5000 takes minutes and gigabytes to load and
// replay): tests that load or replay every bundled scenario take
// TestedLibraryNames, which leaves it out, and a make target replays it.
const LargeTag = "large"

// LibraryMeta is what a bundled scenario says of itself, read without
// loading it (no objects generated, no churn expanded).
type LibraryMeta struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Tags        []string `yaml:"tags"`
}

// LibraryMetaOf reads a bundled scenario's name, description and tags.
func LibraryMetaOf(name string) (LibraryMeta, error) {
	var m LibraryMeta
	b, err := fs.ReadFile(Library(), path.Clean(name)+".yaml")
	if err != nil {
		return m, err
	}
	err = yaml.Unmarshal(b, &m)
	return m, err
}

// IsLarge reports whether a bundled scenario carries LargeTag.
func IsLarge(name string) bool {
	m, err := LibraryMetaOf(name)
	return err == nil && slices.Contains(m.Tags, LargeTag)
}

// TestedLibraryNames lists the bundled scenarios the test suites load and
// replay: every one but the large (LargeTag), sorted.
func TestedLibraryNames() []string {
	return slices.DeleteFunc(LibraryNames(), IsLarge)
}
