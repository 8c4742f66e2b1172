package migrate

import "embed"

// Stories are the migration library (stories/NAME/story.yaml with the
// cluster dump and kube-proxy configuration it names), built in so that a
// run away from the repository, the privileged suite's inside the VM,
// compares them too (Options.ReadFile reading from it).
//
//go:embed stories
var Stories embed.FS
