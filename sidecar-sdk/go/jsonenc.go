package kplug

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// encodeStatus turns a status given as any Go value into the compact JSON
// object every SDK sends, refusing what the operator would refuse. what
// names the status in messages ("status", "status of Kind name").
func encodeStatus(status any, what string) ([]byte, error) {
	encoded, object, err := encodeObject(status, what)
	if err != nil {
		return nil, err
	}
	if err := checkReservedKeys(object, what); err != nil {
		return nil, err
	}
	return encoded, nil
}

// checkReservedKeys refuses a status that sets a key the operator owns.
func checkReservedKeys(object map[string]any, what string) error {
	for _, key := range ReservedStatusKeys {
		if _, ok := object[key]; ok {
			return fmt.Errorf("%s: key %q is reserved for the operator (it owns %s); report it under another key, or as a condition",
				what, key, joinSorted(ReservedStatusKeys))
		}
	}
	return nil
}

// encodeObject is any Go value as a compact JSON object, and that object
// as a map (to read, not to change: it may be the one given); an error when
// it is not a JSON object.
func encodeObject(status any, what string) ([]byte, map[string]any, error) {
	if object, ok := status.(map[string]any); ok && object != nil && plainJSON(object) {
		// What a round trip would give back anyway, decoded already: the
		// round trip was a fifth of an 8 KiB call (kplug-bench P1, perf).
		encoded, err := marshal(object)
		if err != nil {
			return nil, nil, fmt.Errorf("%s cannot be encoded as JSON: %w", what, err)
		}
		return encoded, object, nil
	}
	encoded, err := marshal(status)
	if err != nil {
		return nil, nil, fmt.Errorf("%s cannot be encoded as JSON: %w", what, err)
	}
	// Decoded again, so that whatever the value was (a map, a struct, a
	// json.RawMessage) the keys can be checked and the bytes made compact.
	value, err := decodeJSON(encoded)
	if err != nil {
		return nil, nil, fmt.Errorf("%s cannot be encoded as JSON: %w", what, err)
	}
	object, ok := value.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("%s must be a JSON object (e.g. a map[string]any or a struct), got %s", what, jsonKind(value))
	}
	compact, err := marshal(object)
	return compact, object, err
}

// plainJSON tells whether v holds only what decoding JSON yields (maps
// with string keys, slices of any, strings, booleans, nil, Go numbers), so
// that encoding it gives the same JSON as encoding, decoding and encoding
// it again. A struct, a json.Number, a json.RawMessage or a Marshaler may
// not: those take the round trip.
func plainJSON(v any) bool {
	switch v := v.(type) {
	case nil, string, bool, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	case map[string]any:
		for _, e := range v {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

// marshal is compact JSON with non-ASCII characters as UTF-8: no HTML
// escaping, and U+2028/U+2029 unescaped as well (encoding/json always
// escapes them; the other SDKs do not).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return unescapeLineSeparators(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// unescapeLineSeparators rewrites the escapes \u2028 and \u2029 inside JSON
// strings as the characters themselves.
func unescapeLineSeparators(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u202`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(b):
			if i+5 < len(b) && b[i+1] == 'u' && string(b[i+2:i+5]) == "202" && (b[i+5] == '8' || b[i+5] == '9') {
				out = append(out, 0xe2, 0x80, 0xa8+(b[i+5]-'8')) // U+2028 or U+2029 in UTF-8
				i += 5
				continue
			}
			out = append(out, c, b[i+1])
			i++
			continue
		}
		out = append(out, c)
	}
	return out
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "a JSON array"
	case string:
		return "a JSON string"
	case bool:
		return "a JSON boolean"
	default:
		return "a JSON number"
	}
}

func joinSorted(items []string) string {
	sorted := slices.Sorted(slices.Values(items))
	s := ""
	for i, item := range sorted {
		switch {
		case i == 0:
		case i == len(sorted)-1:
			s += " and "
		default:
			s += ", "
		}
		s += item
	}
	return s
}
