package management

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

func TestSelectColumnsKeepsNestedFieldsNested(t *testing.T) {
	it := item{"name": "q", "queue_totals": item{"messages": 3, "messages_ready": 1}, "other": true}
	got := selectColumns(it, []string{"name", "queue_totals.messages", "missing", "name.deeper"})
	want := item{"name": "q", "queue_totals": item{"messages": 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestSortOrdersNumbersByValueAndMissingFirst(t *testing.T) {
	items := []item{{"name": "b", "messages": uint64(10)}, {"name": "a", "messages": uint64(9)}, {"name": "c"}}
	r := httptest.NewRequest("GET", "/api/queues?sort=messages", nil)
	out, err := shapeList(r, items, []string{"name"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range out.([]item) {
		names = append(names, it["name"].(string))
	}
	if !reflect.DeepEqual(names, []string{"c", "a", "b"}) {
		t.Fatalf("sorted by messages: %v", names)
	}
}

func TestAnEmptyListingHasAnEmptyFirstPage(t *testing.T) {
	r := httptest.NewRequest("GET", "/api/queues?page=1", nil)
	out, err := shapeList(r, nil, []string{"name"})
	if err != nil {
		t.Fatal(err)
	}
	page := out.(item)
	if page["item_count"] != 0 || page["page_count"] != 0 || len(page["items"].([]item)) != 0 {
		t.Fatalf("empty page: %v", page)
	}
}

func TestPropertiesKeyTellsArgumentsApart(t *testing.T) {
	if k := propertiesKey("", nil); k != "~" {
		t.Fatalf("empty key: %q", k)
	}
	if k := propertiesKey("rk", map[string]any{}); k != "rk" {
		t.Fatalf("plain key: %q", k)
	}
	a, b := propertiesKey("rk", map[string]any{"x": 1.0}), propertiesKey("rk", map[string]any{"x": 2.0})
	if a == b || a == "rk" {
		t.Fatalf("keys with arguments: %q %q", a, b)
	}
}

func TestRouterUnescapesEachSegmentAlone(t *testing.T) {
	var rt router
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	rt.handle("/api/queues/{vhost}/{name}", ok)
	rt.handle("/api/queues/quorum/{vhost}/{name}/replicas/add", ok)
	r := httptest.NewRequest("GET", "/api/queues/%2F/a%2Fb", nil)
	if rt.match(r) == nil {
		t.Fatal("no match")
	}
	if got := []string{r.PathValue("vhost"), r.PathValue("name")}; !reflect.DeepEqual(got, []string{"/", "a/b"}) {
		t.Fatalf("path values %v", got)
	}
	if rt.match(httptest.NewRequest("GET", "/api/queues/%2F", nil)) != nil {
		t.Fatal("a shorter path matched")
	}
}
