package baoconfig

import (
	"regexp"

	"github.com/hashicorp/hcl/v2/hclwrite"
)

// InitRequest is one request of OpenBao's declarative self-initialization,
// rendered as
//
//	initialize "Name" {
//	  request "Name" {
//	    operation = "update"
//	    path      = "sys/auth/userpass"
//	    data { ... }
//	  }
//	}
//
// Data follows the rules of user config values. A map holding eval_source
// and eval_type is read by OpenBao as a reference (for example
// eval_source = "env", env_var = "ADMIN_PASSWORD"), which keeps secrets out
// of the file.
type InitRequest struct {
	Name         string
	Operation    string // create, read, update, patch, delete or list
	Path         string
	Data         map[string]any
	AllowFailure bool
}

// initName is the name rule OpenBao's profile engine enforces at start
// (helper/profiles validateNameConvention); checking it here turns a
// crash-looping pod into an error at render time.
var initName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

var initOperations = []string{"create", "read", "update", "patch", "delete", "list"}

// RenderSelfInit returns the separate file of initialize stanzas. Only pod-0
// loads it, and only before initialization: a joiner that carries it would
// initialize a cluster of its own, and OpenBao runs it once, on the first
// unseal of fresh storage.
func RenderSelfInit(reqs []InitRequest) ([]byte, error) {
	if len(reqs) == 0 {
		return nil, invalidf("self-init: no requests")
	}
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	seen := make(map[string]bool, len(reqs))
	for i, r := range reqs {
		if err := CheckInitRequest(r); err != nil {
			return nil, err
		}
		if seen[r.Name] {
			return nil, invalidf("self-init request %q: duplicate name", r.Name)
		}
		seen[r.Name] = true
		if i > 0 {
			body.AppendNewline()
		}
		rb := body.AppendNewBlock("initialize", []string{r.Name}).Body().
			AppendNewBlock("request", []string{r.Name}).Body()
		rb.SetAttributeRaw("operation", stringTokens(r.Operation))
		rb.SetAttributeRaw("path", stringTokens(r.Path))
		if r.AllowFailure {
			rb.SetAttributeRaw("allow_failure", boolTokens(true))
		}
		if len(r.Data) > 0 {
			if err := appendBlock(rb, "data", r.Data); err != nil {
				return nil, err
			}
		}
	}
	return f.Bytes(), nil
}

// CheckInitRequest checks one self-init request as RenderSelfInit does.
func CheckInitRequest(r InitRequest) error {
	if !initName.MatchString(r.Name) {
		return invalidf("self-init request %q: a name starts with a letter or underscore and holds only letters, digits, - and _", r.Name)
	}
	if !contains(initOperations, r.Operation) {
		return invalidf("self-init request %q: operation %q: want one of %v", r.Name, r.Operation, initOperations)
	}
	if r.Path == "" {
		return invalidf("self-init request %q: empty path", r.Name)
	}
	for _, k := range sortedKeys(r.Data) {
		if err := checkUserValue("initialize."+r.Name+".data."+k, r.Data[k], 2); err != nil {
			return err
		}
	}
	return nil
}
