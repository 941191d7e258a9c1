package broker

import "testing"

func TestTopicMatch(t *testing.T) {
	cases := []struct {
		pattern, key string
		want         bool
	}{
		{"a.b.c", "a.b.c", true},
		{"a.b.c", "a.b", false},
		{"a.*.c", "a.b.c", true},
		{"a.*.c", "a.c", false},
		{"a.#", "a", true},
		{"a.#", "a.b.c", true},
		{"#", "", true},
		{"#", "a.b", true},
		{"*", "", false},
		{"*", "a", true},
		{"*", "a.b", false},
		{"#.c", "c", true},
		{"#.c", "a.b.c", true},
		{"#.c", "a.b.c.d", false},
		{"a.#.#.d", "a.d", true},
		{"a.#.b.#", "a.x.b", true},
		{"a.#.b.#", "a.x.c", false},
		{"*.#", "", false},
		{"*.#", "a", true},
		{"a..b", "a..b", true},
		{"a.*.b", "a..b", true},
		{"", "", true},
		{"", "a", false},
	}
	for _, c := range cases {
		if got := topicMatch(splitTopic(c.pattern), splitTopic(c.key)); got != c.want {
			t.Errorf("topicMatch(%q, %q) = %v, want %v", c.pattern, c.key, got, c.want)
		}
	}
}
