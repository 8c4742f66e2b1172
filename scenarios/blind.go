package scenarios

// The steps and expectations that never look at the dataplane
// (DataplaneBlind): they write to the API server, act on the runner or a
// node's proxy, or read what the world measures (syncs, latencies,
// samples, slices).

func (*ApplyStep) DataplaneBlind()      {}
func (*UpdateStep) DataplaneBlind()     {}
func (*PatchStep) DataplaneBlind()      {}
func (*DeleteStep) DataplaneBlind()     {}
func (*CreateStep) DataplaneBlind()     {}
func (*ChurnStep) DataplaneBlind()      {}
func (*PodReadyStep) DataplaneBlind()   {}
func (*RolloutStep) DataplaneBlind()    {}
func (*RestartStep) DataplaneBlind()    {}
func (*NodeStep) DataplaneBlind()       {}
func (*RunStep) DataplaneBlind()        {}
func (*RetryAfterStep) DataplaneBlind() {}
func (*StopStep) DataplaneBlind()       {}
func (*SyncCostStep) DataplaneBlind()   {}

func (*SyncsExpectation) DataplaneBlind()       {}
func (*LatencyExpectation) DataplaneBlind()     {}
func (*ProgrammingExpectation) DataplaneBlind() {}
func (*EndpointsExpectation) DataplaneBlind()   {}
func (*NextRunExpectation) DataplaneBlind()     {}
func (*ClusterExpectation) DataplaneBlind()     {}
