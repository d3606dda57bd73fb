package deploycheck

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/yannh/kubeconform/pkg/validator"
)

// Validator validates manifests with kubeconform in strict mode against the
// schemas of a location Schemas wrote. A kind without a schema is an error,
// not a skip.
type Validator struct {
	v validator.Validator
}

// NewValidator returns a Validator reading schemas from location.
func NewValidator(location string) (*Validator, error) {
	v, err := validator.New([]string{location}, validator.Opts{
		KubernetesVersion: KubernetesVersion,
		Strict:            true,
	})
	if err != nil {
		return nil, fmt.Errorf("start kubeconform: %w", err)
	}
	return &Validator{v: v}, nil
}

// Verdict is what kubeconform said of one object.
type Verdict struct {
	// Object is KIND/NAME.
	Object string
	// Err is nil for a valid object; else the reasons.
	Err error
}

// Validate validates every object of m (a stream of YAML documents); an
// empty document counts as no object.
func (v *Validator) Validate(m Manifest) []Verdict {
	var out []Verdict
	for _, r := range v.v.Validate(m.Name, io.NopCloser(bytes.NewReader(m.Data))) {
		if r.Status == validator.Empty {
			continue
		}
		obj := m.Name
		if sig, err := r.Resource.Signature(); err == nil {
			obj = sig.Kind + "/" + sig.Name
		}
		var err error
		switch r.Status {
		case validator.Valid:
		case validator.Invalid:
			// N.B. r.Err holds the whole tree of the schema's errors;
			// r.ValidationErrors only its first level ("/spec: validation
			// failed" for a mistake deeper in the spec).
			msg := "validation failed"
			if r.Err != nil {
				msg = strings.TrimPrefix(r.Err.Error(), "problem validating schema. Check JSON formatting: ")
			}
			err = fmt.Errorf("invalid: %s", msg)
		case validator.Skipped:
			err = fmt.Errorf("skipped: every object must be validated")
		default:
			err = fmt.Errorf("not validated: %v", r.Err)
		}
		out = append(out, Verdict{Object: obj, Err: err})
	}
	return out
}
