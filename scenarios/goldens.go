package scenarios

// Golden is an expected dataplane snapshot: a mode's expectation owns its
// keys (Key for the inline text, FileKey for a file relative to the
// scenario) and the core reads, compares and rewrites it, always through
// the scenario's folder.
type Golden struct {
	Key, FileKey string
	Inline       *string
	File         string
	Src          Src // the expect mapping's
}

// Given reports whether the expect block holds this golden.
func (g Golden) Given() bool { return g.Inline != nil || g.File != "" }

// Validate checks that one of the two keys is given and that a golden file
// may be read (or created by --update).
func (g Golden) Validate(v *Validator) {
	if g.Inline != nil && g.File != "" {
		v.Errorf(g.Src.At(g.FileKey), "give %s or %s, not both", g.Key, g.FileKey)
	}
	if g.File != "" {
		if err := v.s.folder.check(g.File); err != nil {
			v.Errorf(g.Src.At(g.FileKey), "%v", err)
		}
	}
}
