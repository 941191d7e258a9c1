package replica

import "testing"

func TestConsumerIDNamesItsNode(t *testing.T) {
	seen := map[uint64]bool{}
	for _, node := range []string{"warren-0", "warren-1", "warren-2", "a", ""} {
		for range 100 {
			id := ConsumerIDFor(node)
			if consumerNode(id) != NodeTag(node) || id == 0 || seen[id] {
				t.Fatalf("%s: ID %x: tag %x, want %x (or zero, or repeated)", node, id, consumerNode(id), NodeTag(node))
			}
			seen[id] = true
		}
	}
	if NodeTag("warren-0") == NodeTag("warren-1") {
		t.Fatal("two nodes share a tag")
	}
}
