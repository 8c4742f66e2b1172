package scenarios

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/proxysim/proxysim/scenarios/internal/sample"
	"go.yaml.in/yaml/v3"
)

// The fast path must give exactly what yaml.v3 gives for every document it
// accepts; it may refuse any document.
func checkFastAgainstYAML(t *testing.T, doc []byte) (accepted bool) {
	t.Helper()
	var buf bytes.Buffer
	if _, ok := fastJSON(append([]byte(nil), doc...), &buf); !ok {
		return false
	}
	var want any
	if err := yaml.Unmarshal(doc, &want); err != nil {
		t.Fatalf("fast path accepted what yaml.v3 rejects (%v):\n%s", err, doc)
	}
	var got any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("fast path wrote invalid JSON %q: %v", buf.String(), err)
	}
	wantJSON, err := json.Marshal(jsonable(want))
	if err != nil {
		return true // not representable as JSON; the slow path reports it
	}
	var wantV any
	_ = json.Unmarshal(wantJSON, &wantV)
	if !reflect.DeepEqual(got, wantV) {
		t.Fatalf("fast path differs from yaml.v3 for:\n%s\n got  %s\n want %s", doc, buf.String(), wantJSON)
	}
	return true
}

var fastCases = []string{
	"a: 1\nb: two\nc: 10.96.0.1\nd: true\ne: null\nf: ~\ng:\n",
	"a:\n- 1\n- x\n- - nested\n  - more\nb: [1, 2, c]\nc: {x: 1, y: z}\nd: []\ne: {}\n",
	"a: 'it''s'\nb: \"quoted\"\nc: v1.2.3\nd: 2024-01-01\ne: 1.5\nf: 0x10\ng: 1e3\nh: .inf\ni: -1\nj: +1\nk: 007\n",
	"# comment\na: b # trailing\nc: 'x' # trailing\nd: \"y\" # t\n",
	"list:\n- name: a\n  value: 1\n- name: b\n  sub:\n    deep: yes\n",
	"a: |\n  block\nb: x\n",
	"a: &x 1\nb: *x\n",
	"a: b\n  continued\n",
	"a: b: c\n",
	"a: 1\na: 2\n",
	"\"k:ey\": v\n'q': w\n",
	"url: http://x:80/y\nempty: ''\nspace: a b c\n",
	"a:\n  - x\n  -\n  - y\n",
	"- a\n- b\n",
	"a: [x, y]\n- b\n",
	"a: 'unterminated\n",
	"a: \"es\\\"caped\"\n",
	"a:\tb\n",
	"key with spaces: v\n",
	"a: -\n",
	"a: \"\"\nb: ''\n",
	"a: !!str 1\n",
	"<<: {a: 1}\n",
	"a: {b: [1]}\n",
	"a: x,y\nb: ]x\n",
	"a: [\"10.0.0.1\", '10.0.0.2', x]\nb: {k: \"v\", 'q': 'it''s'}\n",
	"a: [\"x, y\"]\nb: ['a,b', c]\n",
}

func TestFastYAMLMatchesYAMLv3(t *testing.T) {
	accepted := 0
	for _, c := range fastCases {
		if checkFastAgainstYAML(t, []byte(c)) {
			accepted++
		}
	}
	_ = fs.WalkDir(Library(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(Library(), p)
			docs, ok := splitDocuments(b)
			if ok {
				for _, doc := range docs {
					if checkFastAgainstYAML(t, doc.data) {
						accepted++
					}
				}
			}
		}
		return nil
	})
	file, _ := sample.WriteClusterDump(t, t.TempDir(), 3, 4)
	dump, err := os.ReadFile(filepath.Join(filepath.Dir(file), "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := splitDocuments(dump)
	for _, doc := range docs {
		if len(bytes.TrimSpace(doc.data)) == 0 {
			continue
		}
		if !checkFastAgainstYAML(t, doc.data) {
			t.Errorf("the fast path refused a plain cluster dump document:\n%s", doc.data)
		}
		accepted++
	}
	if accepted < 12 {
		t.Fatalf("the fast path took only %d documents", accepted)
	}
}

func FuzzFastYAML(f *testing.F) {
	for _, c := range fastCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkFastAgainstYAML(t, doc)
	})
}
