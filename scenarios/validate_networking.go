package scenarios

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	networking "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The API server's rules for the objects an ingress controller reads, after
// kubernetes pkg/apis/networking/validation (ValidateIngressCreate,
// ValidateIngressClass) and pkg/apis/core/validation (ValidateConfigMap,
// ValidateSecret), for the fields proxysim reads.

func defaultIngress(ing *networking.Ingress) {
	if ing.Namespace == "" {
		ing.Namespace = "default"
	}
}

func validateIngress(ing *networking.Ingress) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&ing.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	if n := ing.Spec.IngressClassName; n != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*n) {
			errs = append(errs, field.Invalid(spec.Child("ingressClassName"), *n, msg))
		}
	}
	if ing.Spec.DefaultBackend != nil {
		errs = append(errs, validateIngressBackend(spec.Child("defaultBackend"), ing.Spec.DefaultBackend)...)
	}
	if len(ing.Spec.Rules) == 0 && ing.Spec.DefaultBackend == nil {
		errs = append(errs, field.Required(spec, "either defaultBackend or rules"))
	}
	for i, r := range ing.Spec.Rules {
		f := spec.Child("rules").Index(i)
		if r.Host != "" {
			h := strings.TrimPrefix(r.Host, "*.")
			for _, msg := range validation.IsDNS1123Subdomain(h) {
				errs = append(errs, field.Invalid(f.Child("host"), r.Host, msg))
			}
		}
		if r.HTTP == nil {
			continue
		}
		if len(r.HTTP.Paths) == 0 {
			errs = append(errs, field.Required(f.Child("http", "paths"), "at least one path"))
		}
		for j, p := range r.HTTP.Paths {
			pf := f.Child("http", "paths").Index(j)
			if p.PathType == nil {
				errs = append(errs, field.Required(pf.Child("pathType"), "pathType"))
			} else {
				switch *p.PathType {
				case networking.PathTypeExact, networking.PathTypePrefix, networking.PathTypeImplementationSpecific:
				default:
					errs = append(errs, field.NotSupported(pf.Child("pathType"), *p.PathType, []string{"Exact", "Prefix", "ImplementationSpecific"}))
				}
			}
			if !strings.HasPrefix(p.Path, "/") {
				errs = append(errs, field.Invalid(pf.Child("path"), p.Path, "must be an absolute path"))
			}
			errs = append(errs, validateIngressBackend(pf.Child("backend"), &p.Backend)...)
		}
	}
	for i, t := range ing.Spec.TLS {
		if t.SecretName != "" {
			for _, msg := range validation.IsDNS1123Subdomain(t.SecretName) {
				errs = append(errs, field.Invalid(spec.Child("tls").Index(i).Child("secretName"), t.SecretName, msg))
			}
		}
	}
	return errs
}

// validateIngressBackend: a service backend names a service (a DNS-1035
// label) and exactly one of a port name or number; resource backends are
// not modelled.
func validateIngressBackend(f *field.Path, b *networking.IngressBackend) field.ErrorList {
	var errs field.ErrorList
	if b.Resource != nil {
		return append(errs, field.Forbidden(f.Child("resource"), "resource backends are not modelled"))
	}
	s := b.Service
	if s == nil {
		return append(errs, field.Required(f.Child("service"), "a service backend"))
	}
	for _, msg := range validation.IsDNS1035Label(s.Name) {
		errs = append(errs, field.Invalid(f.Child("service", "name"), s.Name, msg))
	}
	switch {
	case s.Port.Name != "" && s.Port.Number != 0:
		errs = append(errs, field.Invalid(f.Child("service", "port"), s.Port, "name or number, not both"))
	case s.Port.Name != "":
		for _, msg := range validation.IsValidPortName(s.Port.Name) {
			errs = append(errs, field.Invalid(f.Child("service", "port", "name"), s.Port.Name, msg))
		}
	default:
		for _, msg := range validation.IsValidPortNum(int(s.Port.Number)) {
			errs = append(errs, field.Invalid(f.Child("service", "port", "number"), s.Port.Number, msg))
		}
	}
	return errs
}

func validateIngressClass(c *networking.IngressClass) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&c.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if c.Spec.Controller == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "controller"), "the controller's name"))
	}
	return errs
}

func defaultConfigMap(c *v1.ConfigMap) {
	if c.Namespace == "" {
		c.Namespace = "default"
	}
}

func validateConfigMap(c *v1.ConfigMap) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&c.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	for k := range c.Data {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, msg))
		}
	}
	return errs
}

func defaultSecret(s *v1.Secret) {
	if s.Namespace == "" {
		s.Namespace = "default"
	}
}

func validateSecret(s *v1.Secret) field.ErrorList {
	return apivalidation.ValidateObjectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
}
