package sim

import (
	"fmt"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// What the API server fills in on a write and the fake clientset does not
// (FACTS §1.12): a name for an object created with only generateName, a UID
// and a creationTimestamp on create, both kept across updates. Controllers
// depend on them: the EndpointSlice controller creates its slices by
// generateName, owns them by the Service's UID, and takes a new Service's
// trigger time from its creationTimestamp.

// nameAlphabet is the API server's alphabet for generated name suffixes
// (k8s.io/apiserver pkg/storage/names, SimpleNameGenerator): no vowels, no
// look-alike digits.
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// Name generation follows k8s.io/apiserver's SimpleNameGenerator: the base is
// cut to 58 characters and 5 characters are appended.
const (
	maxGeneratedNameBase = 58
	generatedSuffixLen   = 5
)

// admit returns obj as the API server would store it, copying it only if it
// changes anything. cur is the stored object an update replaces (nil on a
// create).
func (w *World) admit(k *kind, obj runtime.Object, cur runtime.Object) runtime.Object {
	m := obj.(Object)
	var c Object
	if cur != nil {
		c = cur.(Object)
	}
	needName := cur == nil && m.GetName() == "" && m.GetGenerateName() != ""
	needUID := m.GetUID() == "" && (cur == nil || c.GetUID() != "")
	needTime := zeroTime(m) && (cur == nil || !zeroTime(c))
	if !needName && !needUID && !needTime {
		return obj
	}
	// A shallow copy is enough: only metadata scalars change, and the store
	// deep-copies what it keeps.
	cp := shallowCopy(obj)
	m = cp.(Object)
	if needName {
		m.SetName(w.generateName(k, m.GetNamespace(), m.GetGenerateName()))
	}
	if needUID {
		if c != nil {
			m.SetUID(c.GetUID())
		} else {
			w.uids++
			m.SetUID(types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", w.uids)))
		}
	}
	if needTime {
		if c != nil {
			m.SetCreationTimestamp(c.GetCreationTimestamp())
		} else {
			// Stored timestamps have whole seconds (metav1.Time's wire
			// formats drop the fraction).
			m.SetCreationTimestamp(metav1.NewTime(w.Clock.Now().Truncate(time.Second)))
		}
	}
	return cp
}

// generateName appends a suffix to base, as the API server does, from a
// deterministic sequence: the world's n-th generated name is the same on
// every run. A suffix already taken in the store is skipped, where the API
// server would fail the create and the client retry.
func (w *World) generateName(k *kind, namespace, base string) string {
	if len(base) > maxGeneratedNameBase {
		base = base[:maxGeneratedNameBase]
	}
	for {
		w.generated++
		// A multiplicative hash spreads consecutive counters over the
		// alphabet, so that generated names look like the API server's.
		x := uint64(w.generated) * 0x9E3779B97F4A7C15
		b := make([]byte, generatedSuffixLen)
		for i := range b {
			b[i] = nameAlphabet[x%uint64(len(nameAlphabet))]
			x /= uint64(len(nameAlphabet))
		}
		name := base + string(b)
		if _, taken := w.store.stored(k.gvr, namespace, name); !taken {
			return name
		}
	}
}

func zeroTime(m Object) bool {
	t := m.GetCreationTimestamp()
	return t.IsZero()
}

// shallowCopy copies the object's top-level struct (its ObjectMeta by
// value), sharing slices, maps and pointers with obj.
func shallowCopy(obj runtime.Object) runtime.Object {
	v := reflect.ValueOf(obj).Elem()
	cp := reflect.New(v.Type())
	cp.Elem().Set(v)
	return cp.Interface().(runtime.Object)
}
