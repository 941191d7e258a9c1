package gen

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The JSON shapes below mirror rabbitmq-codegen's amqp-rabbitmq-0.9.1.json; only the keys the
// generator uses are declared.

type specFile struct {
	Domains   [][2]string    `json:"domains"`
	Constants []specConstant `json:"constants"`
	Classes   []specClass    `json:"classes"`
}

type specConstant struct {
	Name  string `json:"name"`
	Value int    `json:"value"`
	Class string `json:"class"` // "soft-error", "hard-error" or empty
}

type specClass struct {
	ID         int          `json:"id"`
	Name       string       `json:"name"`
	Methods    []specMethod `json:"methods"`
	Properties []specField  `json:"properties"`
}

type specMethod struct {
	ID          int         `json:"id"`
	Name        string      `json:"name"`
	Synchronous bool        `json:"synchronous"`
	Content     bool        `json:"content"`
	Arguments   []specField `json:"arguments"`
}

// specField is a method argument or a content property: it names either a wire type or a
// domain that resolves to one.
type specField struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Domain string `json:"domain"`
}

// The model is the spec resolved into what the emitters need: wire types instead of domains,
// Go names, and reserved arguments marked.

type model struct {
	frameConstants []constant
	replyCodes     []constant
	classes        []*class
	properties     []field // the content properties of propertiesClass
}

type constant struct {
	specName string
	goName   string
	value    int
	class    string
}

type class struct {
	id      int
	name    string
	goName  string
	methods []*method
}

type method struct {
	class       *class
	id          int
	fullName    string // "basic.get-ok"
	goName      string // "BasicGetOk"
	synchronous bool
	content     bool
	args        []field
}

type field struct {
	name     string // spec name, "routing-key"
	goName   string // "RoutingKey"; empty when reserved
	comment  string // why goName is not the spec's name, if it is not
	wireType string // octet, short, long, longlong, shortstr, longstr, bit, table, timestamp
	reserved bool
}

var wireTypes = map[string]bool{
	"octet": true, "short": true, "long": true, "longlong": true, "shortstr": true,
	"longstr": true, "bit": true, "table": true, "timestamp": true,
}

// maxPropertyFlags is how many properties fit in the first property-flags word (bit 0 is the
// continuation flag). Basic has 14; supporting continuation words would be dead code.
const maxPropertyFlags = 15

func parseSpec(specJSON []byte) (*model, error) {
	var spec specFile
	if err := json.Unmarshal(specJSON, &spec); err != nil {
		return nil, fmt.Errorf("parsing spec: %w", err)
	}
	domains := make(map[string]string, len(spec.Domains))
	for _, d := range spec.Domains {
		domains[d[0]] = d[1]
	}
	resolve := func(where string, f specField) (string, error) {
		t := f.Type
		if t == "" {
			var ok bool
			if t, ok = domains[f.Domain]; !ok {
				return "", fmt.Errorf("%s: unknown domain %q", where, f.Domain)
			}
		}
		if !wireTypes[t] {
			return "", fmt.Errorf("%s: unsupported type %q", where, t)
		}
		return t, nil
	}

	m := &model{}
	for _, c := range spec.Constants {
		k := constant{specName: c.Name, goName: goName(strings.ToLower(c.Name)), value: c.Value, class: c.Class}
		// The spec lists frame constants and reply codes together. The codes are the ones it
		// classes as soft or hard errors, plus REPLY-SUCCESS.
		if c.Class != "" || strings.HasPrefix(c.Name, "REPLY-") {
			m.replyCodes = append(m.replyCodes, k)
		} else {
			m.frameConstants = append(m.frameConstants, k)
		}
	}

	propertiesClass := ""
	for _, sc := range spec.Classes {
		c := &class{id: sc.ID, name: sc.Name, goName: goName(sc.Name)}
		for _, sm := range sc.Methods {
			mt := &method{
				class:       c,
				id:          sm.ID,
				fullName:    sc.Name + "." + sm.Name,
				goName:      c.goName + goName(sm.Name),
				synchronous: sm.Synchronous,
				content:     sm.Content,
			}
			for _, a := range sm.Arguments {
				where := mt.fullName + " " + a.Name
				t, err := resolve(where, a)
				if err != nil {
					return nil, err
				}
				f := field{name: a.Name, wireType: t, reserved: isReserved(sc.Name, sm.Name, a.Name)}
				if !f.reserved {
					f.goName, f.comment = argumentGoName(a.Name)
					if methodSetNames[f.goName] {
						return nil, fmt.Errorf("%s: Go name %s collides with a Method method; add it to argumentNames", where, f.goName)
					}
				}
				mt.args = append(mt.args, f)
			}
			c.methods = append(c.methods, mt)
		}
		if len(sc.Properties) > 0 {
			if propertiesClass != "" {
				return nil, fmt.Errorf("classes %s and %s both have properties; the generator emits one Properties type", propertiesClass, sc.Name)
			}
			if len(sc.Properties) > maxPropertyFlags {
				return nil, fmt.Errorf("class %s has %d properties; more than %d need continuation flag words", sc.Name, len(sc.Properties), maxPropertyFlags)
			}
			propertiesClass = sc.Name
			for _, p := range sc.Properties {
				t, err := resolve(sc.Name+" property "+p.Name, p)
				if err != nil {
					return nil, err
				}
				if t == "bit" {
					return nil, fmt.Errorf("%s property %s: bit properties are not supported", sc.Name, p.Name)
				}
				m.properties = append(m.properties, field{name: p.Name, goName: goName(p.Name), wireType: t})
			}
		}
		m.classes = append(m.classes, c)
	}
	if propertiesClass == "" {
		return nil, fmt.Errorf("no class has content properties; package wire needs the Properties type")
	}
	return m, nil
}
