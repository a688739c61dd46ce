package baoconfig

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-secure-stdlib/parseutil"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// protectedKeys are the top-level keys the operator owns. Each either holds
// a stanza the operator renders (listener, storage, seal,
// service_registration, telemetry), would replace one (backend, ha_storage,
// ha_backend, hsm and kms are seal and storage aliases OpenBao also reads),
// carries node identity from the pod (api_addr, cluster_addr), is fatal
// when false (disable_mlock: OpenBao 2.4 dropped mlock), would break Raft
// (disable_clustering), would run binaries from the image (plugin_directory)
// or is a file the operator's wrapper or self-init owns (pid_file,
// initialize), or comes from a typed field of the spec (log_level,
// log_format).
var protectedKeys = []string{
	"api_addr", "backend", "cluster_addr", "disable_clustering", "disable_mlock",
	"ha_backend", "ha_storage", "hsm", "initialize", "kms", "listener",
	"log_format", "log_level", "pid_file", "plugin_directory", "seal",
	"service_registration", "storage", "telemetry",
}

// ProtectedKeys returns, sorted, the top-level keys a user's config may not
// set. The API mirrors it in a CEL rule; Render enforces it.
func ProtectedKeys() []string {
	return append([]string(nil), protectedKeys...)
}

// userKey is the shape of OpenBao's top-level keys: lower snake case.
var userKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// ValueForms says which values a config key takes, for messages.
const ValueForms = "a string, number, boolean, list of those, object (a block) or list of objects"

// maxDepth bounds nesting, so that a hostile document cannot exhaust the
// stack.
const maxDepth = 16

// ValidateUser checks the user keys and values against the rules on
// Input.User: what a JSON decode yields and HCL1 holds without loss,
// durations OpenBao reads (ValidateUserKeys), and the values OpenBao
// checks against each other at start (CheckLeaseTTLs). Render calls it;
// the admission webhook calls its two halves, so that both refuse the
// same configurations with the same words.
func ValidateUser(user map[string]any) error {
	if err := ValidateUserKeys(user); err != nil {
		return err
	}
	return CheckLeaseTTLs(user)
}

// ValidateUserKeys checks each user key and its value on its own.
func ValidateUserKeys(user map[string]any) error {
	for _, k := range sortedKeys(user) {
		v := user[k]
		if !userKey.MatchString(k) {
			return invalidf("config key %q: want lower snake case, like default_lease_ttl", k)
		}
		if contains(protectedKeys, k) {
			return invalidf("config key %q is set by the operator and cannot be overridden", k)
		}
		if err := checkUserValue(k, v, 1); err != nil {
			return err
		}
		if err := checkDuration(k, v); err != nil {
			return err
		}
	}
	return nil
}

// DefaultLeaseTTL is what OpenBao takes for default_lease_ttl and for
// max_lease_ttl when the configuration leaves either unset or zero
// (vault/expiration.go: 32 days).
const DefaultLeaseTTL = 32 * 24 * time.Hour

// CheckLeaseTTLs checks the lease TTLs against each other as OpenBao does
// when it starts (vault.CreateCore): default_lease_ttl may not be longer
// than max_lease_ttl, each taken as DefaultLeaseTTL when unset or zero, or
// the server exits with "cannot have DefaultLeaseTTL larger than
// MaxLeaseTTL". So max_lease_ttl = "1h" alone is refused too. A value that
// is not a duration is left to checkDuration's message. Render calls it
// through ValidateUser; the admission webhook calls it whenever either key
// is new or changed.
func CheckLeaseTTLs(user map[string]any) error {
	def, okDef := leaseTTL(user, "default_lease_ttl")
	maxTTL, okMax := leaseTTL(user, "max_lease_ttl")
	if !okDef || !okMax || def <= maxTTL {
		return nil
	}
	return invalidf("default_lease_ttl (%s) is longer than max_lease_ttl (%s), and OpenBao refuses to start with "+
		"\"cannot have DefaultLeaseTTL larger than MaxLeaseTTL\": want default_lease_ttl at most max_lease_ttl, "+
		"where an unset or zero value means OpenBao's default of %s", leaseText(user, "default_lease_ttl", def),
		leaseText(user, "max_lease_ttl", maxTTL), DefaultLeaseTTL)
}

// leaseTTL reads one lease TTL as OpenBao does; ok is false when it is
// set to something that is not a duration.
func leaseTTL(user map[string]any, key string) (d time.Duration, ok bool) {
	v, set := user[key]
	if !set {
		return DefaultLeaseTTL, true
	}
	if _, isBool := v.(bool); isBool {
		return 0, false
	}
	d, err := parseutil.ParseDurationSecond(v)
	if err != nil {
		return 0, false
	}
	if d == 0 {
		return DefaultLeaseTTL, true
	}
	return d, true
}

func leaseText(user map[string]any, key string, d time.Duration) string {
	v, set := user[key]
	if !set {
		return "unset, so " + d.String()
	}
	return describe(v) + ", " + d.String()
}

// durationKeys are the top-level keys OpenBao parses as durations
// (command/server/config.go, with parseutil.ParseDurationSecond); a value
// it cannot parse stops the server at start.
var durationKeys = []string{"default_lease_ttl", "default_max_request_duration", "max_lease_ttl"}

// DurationForms says which values a duration key takes.
const DurationForms = "a whole number of seconds, or a string such as 768h, 90m, 3600s or 30d"

func checkDuration(key string, v any) error {
	if !contains(durationKeys, key) {
		return nil
	}
	if _, isBool := v.(bool); isBool {
		return invalidf("config key %q: a boolean is not a duration: want %s", key, DurationForms)
	}
	if _, err := parseutil.ParseDurationSecond(v); err != nil {
		return invalidf("config key %q: %s is not a duration: want %s", key, describe(v), DurationForms)
	}
	return nil
}

func checkUserValue(path string, v any, depth int) error {
	if depth > maxDepth {
		return invalidf("config key %q: nested deeper than %d levels", path, maxDepth)
	}
	switch v := v.(type) {
	case string:
		if !utf8.ValidString(v) {
			return invalidf("config key %q: string is not valid UTF-8", path)
		}
	case bool, int, int64:
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return invalidf("config key %q: number %v is not finite", path, v)
		}
	case json.Number:
		if _, err := numberTokens(v); err != nil {
			return invalidf("config key %q: number %q: %s", path, string(v), err.(*InputError).Reason)
		}
	case []any:
		return checkUserList(path, v, depth)
	case map[string]any:
		for _, k := range sortedKeys(v) {
			elem := v[k]
			if k == "" || !utf8.ValidString(k) {
				return invalidf("config key %q: nested key %q is empty or not valid UTF-8", path, k)
			}
			if err := checkUserValue(path+"."+k, elem, depth+1); err != nil {
				return err
			}
		}
	case nil:
		return invalidf("config key %q: null is not a value OpenBao reads: want %s", path, ValueForms)
	default:
		return invalidf("config key %q: unsupported value type %T", path, v)
	}
	return nil
}

func checkUserList(path string, list []any, depth int) error {
	objects := 0
	for i, elem := range list {
		elemPath := path + "[" + strconv.Itoa(i) + "]"
		switch elem.(type) {
		case []any:
			return invalidf("config key %q: lists of lists are not supported: want %s", elemPath, ValueForms)
		case map[string]any:
			objects++
		}
		if err := checkUserValue(elemPath, elem, depth+1); err != nil {
			return err
		}
	}
	if objects != 0 && objects != len(list) {
		return invalidf("config key %q: a list holds either objects or scalars, not both", path)
	}
	return nil
}

// renderUser appends the user keys in sorted order after the operator's
// stanzas. validateUser has accepted them.
func renderUser(body *hclwrite.Body, user map[string]any) error {
	keys := sortedKeys(user)
	if len(keys) > 0 {
		body.AppendNewline()
	}
	for _, k := range keys {
		if err := appendValue(body, k, user[k]); err != nil {
			return err
		}
		if isBlockValue(user[k]) {
			body.AppendNewline()
		}
	}
	return nil
}

func isBlockValue(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return true
	case []any:
		if len(v) > 0 {
			_, ok := v[0].(map[string]any)
			return ok
		}
	}
	return false
}

// appendValue writes one key: an object becomes a block, a list of objects
// one block per element, anything else an attribute.
func appendValue(body *hclwrite.Body, key string, v any) error {
	name := keyName(key)
	switch v := v.(type) {
	case map[string]any:
		return appendBlock(body, name, v)
	case []any:
		if isBlockValue(v) {
			for _, elem := range v {
				if err := appendBlock(body, name, elem.(map[string]any)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	tokens, err := scalarOrListTokens(v)
	if err != nil {
		return invalidf("config key %q: %v", key, err)
	}
	body.SetAttributeRaw(name, tokens)
	return nil
}

func appendBlock(body *hclwrite.Body, name string, m map[string]any) error {
	b := body.AppendNewBlock(name, nil).Body()
	for _, k := range sortedKeys(m) {
		if err := appendValue(b, k, m[k]); err != nil {
			return err
		}
	}
	return nil
}

func scalarOrListTokens(v any) (hclwrite.Tokens, error) {
	if list, ok := v.([]any); ok {
		elems := make([]hclwrite.Tokens, 0, len(list))
		for _, e := range list {
			t, err := scalarTokens(e)
			if err != nil {
				return nil, err
			}
			elems = append(elems, t)
		}
		return hclwrite.TokensForTuple(elems), nil
	}
	return scalarTokens(v)
}

func scalarTokens(v any) (hclwrite.Tokens, error) {
	switch v := v.(type) {
	case string:
		return stringTokens(v), nil
	case bool:
		return boolTokens(v), nil
	case int:
		return intTokens(int64(v)), nil
	case int64:
		return intTokens(v), nil
	case float64:
		return floatTokens(v), nil
	case json.Number:
		return numberTokens(v)
	}
	return nil, invalidf("unsupported value type %T", v)
}

// numberTokens writes a JSON number in the canonical form floatTokens uses,
// rather than passing its text through: JSON allows forms ("1E5", "-0",
// "0.10") whose HCL1 reading differs in type or fails.
func numberTokens(n json.Number) (hclwrite.Tokens, error) {
	if i, err := n.Int64(); err == nil {
		return intTokens(i), nil
	}
	if !strings.ContainsAny(n.String(), ".eE") {
		// HCL1 reads integers as int64; rounding to a float would change it.
		return nil, invalidf("integer %s is outside the 64-bit range OpenBao reads", n)
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, invalidf("not a finite number")
	}
	return floatTokens(f), nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describe shows a value in a message: strings quoted, so that spaces show.
func describe(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}
