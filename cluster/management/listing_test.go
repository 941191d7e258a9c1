package management_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
)

func testListingShape(t *testing.T, n []*apiNode) {
	for i := range 5 {
		expect(t, n[0].guest(t, "PUT", fmt.Sprintf("/api/queues/%%2F/page-%d", i), map[string]any{"arguments": map[string]any{"x-queue-type": "classic"}}), http.StatusCreated, "declare")
	}
	defer func() {
		for i := range 5 {
			n[0].guest(t, "DELETE", fmt.Sprintf("/api/queues/%%2F/page-%d", i), nil)
		}
	}()
	seen(t, n[1], "/api/queues/%2F/page-4")
	r := n[1].guest(t, "GET", "/api/queues/%2F?page=2&page_size=2&name=page-&sort=name&sort_reverse=true&columns=name,vhost", nil)
	expect(t, r, http.StatusOK, "page")
	page := r.object(t)
	if page["page"] != float64(2) || page["page_size"] != float64(2) || page["page_count"] != float64(3) ||
		page["filtered_count"] != float64(5) || page["item_count"] != float64(2) {
		t.Fatalf("page counts: %s", r.body)
	}
	items := page["items"].([]any)
	var names []string
	for _, it := range items {
		m := it.(map[string]any)
		if len(m) != 2 {
			t.Fatalf("columns not applied: %v", m)
		}
		names = append(names, m["name"].(string))
	}
	if !slices.Equal(names, []string{"page-2", "page-1"}) {
		t.Fatalf("second page in reverse: %v", names)
	}
	r = n[1].guest(t, "GET", "/api/queues/%2F?page=1&name=^page-[34]$&use_regex=true", nil)
	expect(t, r, http.StatusOK, "regex filter")
	if got := r.object(t)["filtered_count"]; got != float64(2) {
		t.Fatalf("regex filter matched %v: %s", got, r.body)
	}
	r = n[2].guest(t, "GET", "/api/overview?columns=queue_totals.messages,object_totals.queues", nil)
	expect(t, r, http.StatusOK, "overview columns")
	ov := r.object(t)
	if len(ov) != 2 || ov["queue_totals"].(map[string]any)["messages"] == nil {
		t.Fatalf("nested columns: %s", r.body)
	}
	expectError(t, n[0].guest(t, "GET", "/api/queues?page=0", nil), http.StatusBadRequest, "bad_request", "page 0")
	expectError(t, n[0].guest(t, "GET", "/api/queues?page=1&page_size=501", nil), http.StatusBadRequest, "bad_request", "page too large")
	expectError(t, n[0].guest(t, "GET", "/api/queues?page=9&name=page-", nil), http.StatusBadRequest, "bad_request", "page out of range")
	expectError(t, n[0].guest(t, "GET", "/api/queues?page=1&name=(&use_regex=true", nil), http.StatusBadRequest, "bad_request", "bad regex")
}
