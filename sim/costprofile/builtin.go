package costprofile

func loadBuiltin() { builtin = map[string]*Profile{} }
