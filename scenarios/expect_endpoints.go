package scenarios

// EndpointsExpect checks a v1 Endpoints object (what the legacy Endpoints
// controller writes): whether it exists, and its addresses, each written
// "IP" or "IP hostname" (sorted; ports aside).
type EndpointsExpect struct {
	Namespace         string   `yaml:"namespace"`
	Name              string   `yaml:"name"`
	Exists            *bool    `yaml:"exists"`
	Addresses         []string `yaml:"addresses"`
	NotReadyAddresses []string `yaml:"notReadyAddresses"`
	Src               Src
}

type EndpointsExpectation struct {
	Endpoints *EndpointsExpect `yaml:"endpoints"`
}

func (e *EndpointsExpectation) Validate(v *Validator) {
	ee := e.Endpoints
	if ee == nil {
		return
	}
	if ee.Name == "" {
		v.Errorf(ee.Src.At("name"), "required: the Endpoints' name (its Service's)")
	}
	if ee.Exists != nil && !*ee.Exists && (ee.Addresses != nil || ee.NotReadyAddresses != nil) {
		v.Errorf(ee.Src.At("exists"), "an Endpoints that must not exist has no addresses to check")
	}
}
