package gen

import (
	"strings"
	"testing"
)

func TestGoName(t *testing.T) {
	for spec, want := range map[string]string{
		"routing-key":   "RoutingKey",
		"get-ok":        "GetOk",
		"nowait":        "NoWait",
		"message-id":    "MessageID",
		"class-id":      "ClassID",
		"recover-async": "RecoverAsync",
		"x":             "X",
	} {
		if got := goName(spec); got != want {
			t.Errorf("goName(%q) = %q, want %q", spec, got, want)
		}
	}
}

// miniSpec is a spec with one class whose method has the given arguments (JSON).
func miniSpec(arguments string) []byte {
	return []byte(`{
		"domains": [["flag", "bit"], ["name", "shortstr"]],
		"constants": [{"name": "FRAME-END", "value": 206}, {"name": "REPLY-SUCCESS", "value": 200},
		              {"name": "NOT-FOUND", "value": 404, "class": "soft-error"}],
		"classes": [{"id": 7, "name": "thing", "methods": [
			{"id": 1, "name": "do", "synchronous": true, "arguments": ` + arguments + `}],
			"properties": [{"name": "content-type", "type": "shortstr"}, {"name": "priority", "type": "octet"}]}]}`)
}

func TestGenerateMiniSpec(t *testing.T) {
	var bits []string
	for i := range 9 {
		bits = append(bits, `{"name": "b`+string(rune('a'+i))+`", "domain": "flag"}`)
	}
	src, err := Generate(miniSpec(`[{"name": "ticket", "type": "short"}, {"name": "label", "domain": "name"}, ` + strings.Join(bits, ", ") + `]`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		Header,
		"FrameEnd = 206",
		"ReplySuccess = 200",
		"NotFound     = 404",
		"ClassThing = 7",
		"FlagContentType uint16 = 0x8000",
		"FlagPriority    uint16 = 0x4000",
		"type ThingDo struct",
		"Label string",
		"buf = append(buf, 0, 0) // ticket: reserved",
		// Nine bits take two octets: eight in the first, lowest bit first.
		"bit(m.Ba, 0)|bit(m.Bb, 1)",
		"bit(m.Bh, 7))",
		"buf = append(buf, bit(m.Bi, 0))",
		"m.Label = d.shortstrUTF8()",
		`return "thing.do"`,
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("generated code lacks %q", want)
		}
	}
	if strings.Contains(string(src), "Ticket") {
		t.Error("reserved ticket got a field")
	}
}

func TestGenerateRejects(t *testing.T) {
	tests := map[string][]byte{
		"unknown domain":  miniSpec(`[{"name": "a", "domain": "nope"}]`),
		"unknown type":    miniSpec(`[{"name": "a", "type": "float"}]`),
		"name collision":  miniSpec(`[{"name": "name", "type": "octet"}]`),
		"not JSON":        []byte("{"),
		"no properties":   []byte(`{"classes": [{"name": "a"}]}`),
		"two with props":  []byte(`{"classes": [{"name": "a", "properties": [{"name": "p", "type": "octet"}]}, {"name": "b", "properties": [{"name": "p", "type": "octet"}]}]}`),
		"bit property":    []byte(`{"classes": [{"name": "a", "properties": [{"name": "p", "type": "bit"}]}]}`),
		"many properties": []byte(`{"classes": [{"name": "a", "properties": [` + strings.Repeat(`{"name": "p", "type": "octet"},`, 15) + `{"name": "q", "type": "octet"}]}]}`),
	}
	for name, spec := range tests {
		if _, err := Generate(spec); err == nil {
			t.Errorf("%s: generated without error", name)
		}
	}
}
