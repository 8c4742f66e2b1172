// Package suite runs a user's folder of scenarios the way a CI job does:
// it finds the scenario files under folders, in a stable order, and turns
// each replay's outcome into a machine-readable record (JSON) and into a
// JUnit XML report that CI systems display as test results. It neither loads
// nor replays anything itself: callers do that with the scenarios package
// and hand the results in.
package suite

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/proxysim/proxysim/scenarios"
)

// SkippedFolders are the folder names a search does not enter: they hold
// what scenarios name (manifests, golden tables), as the bundled library is
// laid out. Hidden folders (.git, .github) are skipped too.
var SkippedFolders = []string{"manifests", "golden", "goldens"}

// Skip is a YAML file a search saw and did not take as a scenario, and why.
type Skip struct {
	File   string
	Reason string
}

// Found is what a search found: scenario files in replay order, and the
// YAML files it passed over.
type Found struct {
	Files   []string
	Skipped []Skip
}

// Find returns the scenario files under each root (a folder, searched
// recursively, or a file, taken as it is), roots in the order given and each
// folder's files in lexical order of their paths, each file once.
//
// A file under a folder is a scenario when it ends in .yaml or .yml, lies
// outside SkippedFolders and hidden folders, and its document has a
// top-level proxy or timeline key and neither kind nor apiVersion (those are
// Kubernetes objects or kube-proxy configurations, which scenarios name). A
// YAML file with none of these keys is listed in Skipped.
func Find(roots ...string) (Found, error) {
	var out Found
	seen := map[string]bool{}
	add := func(file string) {
		if key := filepath.Clean(file); !seen[key] {
			seen[key] = true
			out.Files = append(out.Files, file)
		}
	}
	for _, root := range roots {
		fi, err := os.Stat(root)
		if err != nil {
			return Found{}, err
		}
		if !fi.IsDir() {
			add(root)
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != root && (strings.HasPrefix(d.Name(), ".") || slices.Contains(SkippedFolders, d.Name())) {
					return fs.SkipDir
				}
				return nil
			}
			if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
				return nil
			}
			if !d.Type().IsRegular() {
				out.Skipped = append(out.Skipped, Skip{p, "not a regular file"})
				return nil
			}
			is, why, err := isScenario(p)
			switch {
			case err != nil:
				return err
			case is:
				add(p)
			default:
				out.Skipped = append(out.Skipped, Skip{p, why})
			}
			return nil
		})
		if err != nil {
			return Found{}, fmt.Errorf("searching %s for scenarios: %w", root, err)
		}
	}
	return out, nil
}

// ErrNoScenarios says a search found nothing to replay.
var ErrNoScenarios = errors.New("no scenarios found")

// isScenario reads the top-level keys of a YAML file's first document
// (lines that start a key at column 0), without decoding the file: a folder
// may hold cluster dumps of tens of megabytes.
func isScenario(file string) (bool, string, error) {
	fh, err := os.Open(file)
	if err != nil {
		return false, "", err
	}
	defer fh.Close()
	keys := map[string]bool{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), scenarios.MaxFileBytes)
	started := false
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("---")) {
			if started {
				break // a second document: the first one decides
			}
			continue
		}
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' || line[0] == '#' || line[0] == '-' {
			continue
		}
		started = true
		if k, _, ok := bytes.Cut(line, []byte(":")); ok {
			keys[strings.Trim(strings.TrimSpace(string(k)), `"'`)] = true
		}
	}
	if err := sc.Err(); err != nil {
		return false, "", fmt.Errorf("%s: %w", file, err)
	}
	switch {
	case keys["kind"] || keys["apiVersion"]:
		return false, "a Kubernetes object or configuration (top-level kind or apiVersion), which scenarios name", nil
	case keys["proxy"] || keys["timeline"]:
		return true, "", nil
	}
	return false, "no top-level proxy or timeline key", nil
}
