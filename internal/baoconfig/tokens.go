package baoconfig

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// stringTokens returns a quoted string literal that HCL1 (OpenBao's parser)
// and HCL2 both read back as exactly s.
//
// hclwrite's own literals are HCL2: it doubles "${" and "%{" to stop
// template interpolation, and HCL1 reads "$${" back as two dollars. HCL1 in
// turn copies everything between "${" and the matching "}" without
// unescaping, and its scanner lets quotes through inside such a section. So
// a "$" or "%" before "{" is written as a \u escape: neither dialect starts
// a template or interpolation at an escape, and both decode \u0024 to "$".
// Control characters, U+E123 (reserved by HCL1's scanner) and invalid UTF-8
// (replaced by U+FFFD; user values are checked before) are escaped as well.
func stringTokens(s string) hclwrite.Tokens {
	return hclwrite.Tokens{
		{Type: hclsyntax.TokenOQuote, Bytes: []byte{'"'}},
		{Type: hclsyntax.TokenQuotedLit, Bytes: quoteHCL1(s)},
		{Type: hclsyntax.TokenCQuote, Bytes: []byte{'"'}},
	}
}

func quoteHCL1(s string) []byte {
	s = strings.ToValidUTF8(s, "\uFFFD")
	buf := make([]byte, 0, len(s)+8)
	for i, r := range s {
		next := byte(0)
		if i+1 < len(s) {
			next = s[i+1]
		}
		switch {
		case r == '"':
			buf = append(buf, '\\', '"')
		case r == '\\':
			buf = append(buf, '\\', '\\')
		case r == '\n':
			buf = append(buf, '\\', 'n')
		case r == '\r':
			buf = append(buf, '\\', 'r')
		case r == '\t':
			buf = append(buf, '\\', 't')
		case (r == '$' || r == '%') && next == '{',
			r < 0x20, r == 0x7f, r == '\uE123', r == '\u2028', r == '\u2029':
			buf = appendUnicodeEscape(buf, r)
		default:
			buf = utf8.AppendRune(buf, r)
		}
	}
	return buf
}

func appendUnicodeEscape(buf []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(buf, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}

func boolTokens(b bool) hclwrite.Tokens {
	return hclwrite.Tokens{{Type: hclsyntax.TokenIdent, Bytes: []byte(strconv.FormatBool(b))}}
}

func intTokens(i int64) hclwrite.Tokens {
	return hclwrite.Tokens{{Type: hclsyntax.TokenNumberLit, Bytes: strconv.AppendInt(nil, i, 10)}}
}

// floatTokens writes whole numbers that fit an int64 as integers, because
// JSON gives every number as float64 and OpenBao's integer fields do not
// accept HCL1 floats; other values in the shortest form that reads back
// exactly. HCL1's scanner takes "1e+21" and "-0.5" as one FLOAT token.
func floatTokens(f float64) hclwrite.Tokens {
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return intTokens(int64(f))
	}
	return hclwrite.Tokens{{Type: hclsyntax.TokenNumberLit, Bytes: strconv.AppendFloat(nil, f, 'g', -1, 64)}}
}

// bareKey matches keys HCL1 reads unquoted; others are written quoted.
var bareKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// keyName returns the bytes that name an attribute or block. hclwrite writes
// them as given, which lets a nested key that is no identifier be quoted:
// HCL1 accepts string keys.
func keyName(k string) string {
	if bareKey.MatchString(k) && k != "true" && k != "false" {
		return k
	}
	return `"` + string(quoteHCL1(k)) + `"`
}
