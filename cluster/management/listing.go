package management

import (
	"cmp"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// item is one object of an answer, with RabbitMQ's field names.
type item = map[string]any

// RabbitMQ's paging bounds.
const (
	defaultPageSize = 100
	maxPageSize     = 500
)

// replyList answers a listing as RabbitMQ does: sorted by the sort query
// parameter (a field, dotted for a nested one) or else by defaultSort,
// reversed with sort_reverse=true; with page, filtered by name (a
// substring, or with use_regex=true a regular expression) and cut into
// pages; with columns, each item cut to the fields named.
func replyList(w http.ResponseWriter, r *http.Request, items []item, defaultSort ...string) {
	out, err := shapeList(r, items, defaultSort)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// replyItem answers one object, cut to the columns asked for.
func replyItem(w http.ResponseWriter, r *http.Request, it item) {
	writeJSON(w, http.StatusOK, selectColumns(it, columnsOf(r)))
}

func shapeList(r *http.Request, items []item, defaultSort []string) (any, error) {
	q := r.URL.Query()
	sortKeys := defaultSort
	if s := q.Get("sort"); s != "" {
		sortKeys = append([]string{s}, defaultSort...)
	}
	slices.SortStableFunc(items, func(a, b item) int {
		for _, k := range sortKeys {
			if c := compareValues(lookup(a, k), lookup(b, k)); c != 0 {
				return c
			}
		}
		return 0
	})
	if q.Get("sort_reverse") == "true" {
		slices.Reverse(items)
	}
	cols := columnsOf(r)
	if q.Get("page") == "" {
		return cutAll(items, cols), nil
	}
	return paginate(r, items, cols)
}

// paginate is RabbitMQ's paged answer: the page's items and the counts.
func paginate(r *http.Request, items []item, cols []string) (any, error) {
	q := r.URL.Query()
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		return nil, badRequest("Pagination parameters are invalid")
	}
	size := defaultPageSize
	if s := q.Get("page_size"); s != "" {
		size, err = strconv.Atoi(s)
		if err != nil || size < 1 {
			return nil, badRequest("Pagination parameters are invalid")
		}
		if size > maxPageSize {
			return nil, badRequest("Page size must be less than or equal to %d", maxPageSize)
		}
	}
	total := len(items)
	if name := q.Get("name"); name != "" {
		match, err := nameMatcher(name, q.Get("use_regex") == "true")
		if err != nil {
			return nil, err
		}
		items = slices.DeleteFunc(items, func(it item) bool {
			n, _ := it["name"].(string)
			return !match(n)
		})
	}
	filtered := len(items)
	pages := (filtered + size - 1) / size
	if page > pages && filtered > 0 {
		return nil, badRequest("Page out of range")
	}
	start := min((page-1)*size, filtered)
	end := min(start+size, filtered)
	pageItems := cutAll(items[start:end], cols)
	return item{
		"filtered_count": filtered,
		"item_count":     len(pageItems),
		"items":          pageItems,
		"page":           page,
		"page_count":     pages,
		"page_size":      size,
		"total_count":    total,
	}, nil
}

// nameMatcher matches names as RabbitMQ's name filter does: a
// case-insensitive substring, or a regular expression.
func nameMatcher(name string, useRegex bool) (func(string) bool, error) {
	if useRegex {
		re, err := regexp.Compile(name)
		if err != nil {
			return nil, badRequest("invalid regular expression %q: %v", name, err)
		}
		return re.MatchString, nil
	}
	lower := strings.ToLower(name)
	return func(s string) bool { return strings.Contains(strings.ToLower(s), lower) }, nil
}

// columnsOf is the columns query parameter: field paths, dotted for
// nested fields; none means every field.
func columnsOf(r *http.Request) []string {
	c := r.URL.Query().Get("columns")
	if c == "" {
		return nil
	}
	return strings.Split(c, ",")
}

func cutAll(items []item, cols []string) []item {
	out := make([]item, len(items))
	for i, it := range items {
		out[i] = selectColumns(it, cols)
	}
	return out
}

// selectColumns is it with only the fields cols name, nested fields kept
// nested as RabbitMQ keeps them ("queue_totals.messages").
func selectColumns(it item, cols []string) item {
	if len(cols) == 0 {
		return it
	}
	out := item{}
	for _, c := range cols {
		v, ok := lookupOK(it, c)
		if !ok {
			continue
		}
		dst := out
		parts := strings.Split(c, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := dst[p].(item)
			if !ok {
				next = item{}
				dst[p] = next
			}
			dst = next
		}
		dst[parts[len(parts)-1]] = v
	}
	return out
}

func lookup(it item, path string) any {
	v, _ := lookupOK(it, path)
	return v
}

func lookupOK(it item, path string) (any, bool) {
	var cur any = it
	for p := range strings.SplitSeq(path, ".") {
		m, ok := cur.(item)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// compareValues orders two field values: numbers by value, strings and
// booleans as such, a missing value first.
func compareValues(a, b any) int {
	if fa, ok := number(a); ok {
		if fb, ok := number(b); ok {
			return cmp.Compare(fa, fb)
		}
	}
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	sa, aok := a.(string)
	sb, bok := b.(string)
	if aok && bok {
		return cmp.Compare(sa, sb)
	}
	ba, aok := a.(bool)
	bb, bok := b.(bool)
	if aok && bok {
		return cmp.Compare(boolInt(ba), boolInt(bb))
	}
	return 0
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
