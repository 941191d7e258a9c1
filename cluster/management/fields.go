package management

import (
	"encoding/json"
	"strconv"
)

// body is a request's JSON object. RabbitMQ's API takes booleans and
// numbers either as JSON values or as strings ("true", "1"), and
// rabbitmqadmin sends strings: both are read.
type body map[string]any

func (b body) has(key string) bool { _, ok := b[key]; return ok }

func (b body) str(key, def string) (string, error) {
	v, ok := b[key]
	if !ok || v == nil {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", badRequest("%s must be a string", key)
	}
	return s, nil
}

func (b body) boolean(key string, def bool) (bool, error) {
	switch v := b[key].(type) {
	case nil:
		return def, nil
	case bool:
		return v, nil
	case string:
		if p, err := strconv.ParseBool(v); err == nil {
			return p, nil
		}
	}
	return false, badRequest("%s must be true or false", key)
}

func (b body) integer(key string, def int64) (int64, error) {
	switch v := b[key].(type) {
	case nil:
		return def, nil
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n, nil
		}
	case string:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, badRequest("%s must be an integer", key)
}

// object is a JSON object field (arguments, definition, properties); a
// string holding a JSON object is taken too.
func (b body) object(key string) (map[string]any, error) {
	switch v := b[key].(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return v, nil
	case string:
		if v == "" {
			return map[string]any{}, nil
		}
		var m map[string]any
		if json.Unmarshal([]byte(v), &m) == nil && m != nil {
			return m, nil
		}
	}
	return nil, badRequest("%s must be a JSON object", key)
}

// jsonObject parses a JSON object the admin service keeps as text;
// empty is an empty object.
func jsonObject(s string) map[string]any {
	m := map[string]any{}
	if s != "" {
		json.Unmarshal([]byte(s), &m)
	}
	return m
}
