package management

import (
	"net/http"
	"net/url"
	"strings"
)

// router matches request paths to patterns segment by segment, each
// segment unescaped on its own: RabbitMQ's paths carry names that hold
// slashes as %2F (the default vhost "/" is %2F), which net/http's
// ServeMux would unescape into separators before matching.
type router struct {
	routes []route
}

type route struct {
	segments []string // literal, or "{name}" for a wildcard
	handler  http.Handler
}

func (rt *router) handle(pattern string, h http.Handler) {
	rt.routes = append(rt.routes, route{segments: strings.Split(strings.Trim(pattern, "/"), "/"), handler: h})
}

// match is the route r's path matches with the most literal segments,
// its wildcards set as r's path values; nil if none does.
func (rt *router) match(r *http.Request) http.Handler {
	raw := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	segs := make([]string, len(raw))
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil
		}
		segs[i] = u
	}
	var best *route
	bestLiterals := -1
	for i := range rt.routes {
		rte := &rt.routes[i]
		if n, ok := rte.literalsMatching(segs); ok && n > bestLiterals {
			best, bestLiterals = rte, n
		}
	}
	if best == nil {
		return nil
	}
	for i, p := range best.segments {
		if name, ok := wildcard(p); ok {
			r.SetPathValue(name, segs[i])
		}
	}
	return best.handler
}

// literalsMatching reports whether segs match the route, and with how
// many literal segments.
func (rte *route) literalsMatching(segs []string) (int, bool) {
	if len(segs) != len(rte.segments) {
		return 0, false
	}
	literals := 0
	for i, p := range rte.segments {
		if _, ok := wildcard(p); ok {
			continue
		}
		if p != segs[i] {
			return 0, false
		}
		literals++
	}
	return literals, true
}

func wildcard(p string) (string, bool) {
	if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
		return p[1 : len(p)-1], true
	}
	return "", false
}
