package management

import (
	"encoding/json"
	"net/http"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Vhost and user limits (max-connections, max-channels, max-queues),
// one limit per path as RabbitMQ's API sets them; administrator only.

func limitsItem(key, name string, limits map[string]int64) item {
	value := item{}
	for k, v := range limits {
		value[k] = v
	}
	return item{key: name, "value": value}
}

func (s accessAPI) vhostLimits(r *http.Request) ([]item, error) {
	vs, err := s.vhosts(r.Context())
	if err != nil {
		return nil, err
	}
	var out []item
	for _, v := range vs {
		if len(v.Limits) > 0 {
			out = append(out, limitsItem("vhost", v.Name, v.Limits))
		}
	}
	return out, nil
}

func (s accessAPI) userLimits(r *http.Request) ([]item, error) {
	resp, err := s.cfg.Admin.ListUsers(r.Context(), &adminpb.ListUsersRequest{})
	if err != nil {
		return nil, adminError(err)
	}
	var out []item
	for _, u := range resp.Users {
		if len(u.Limits) > 0 {
			out = append(out, limitsItem("user", u.Name, u.Limits))
		}
	}
	return out, nil
}

// listLimits answers the limits of every vhost or user, or with a name
// in the path, of that one.
func (s accessAPI) listLimits(key string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		if err := requireAdmin(c); err != nil {
			return err
		}
		list := s.vhostLimits
		if key == "user" {
			list = s.userLimits
		}
		items, err := list(r)
		if err != nil {
			return err
		}
		if name := r.PathValue(key); name != "" {
			var one []item
			for _, it := range items {
				if it[key] == name {
					one = append(one, it)
				}
			}
			items = one
		}
		if items == nil {
			items = []item{}
		}
		replyList(w, r, items, key)
		return nil
	}
}

// currentLimits are the limits of vhost or user name now; 404 if there
// is no such vhost or user.
func (s accessAPI) currentLimits(r *http.Request, key, name string) (map[string]int64, error) {
	if key == "vhost" {
		vs, err := s.vhosts(r.Context())
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			if v.Name == name {
				return v.Limits, nil
			}
		}
		return nil, notFound()
	}
	resp, err := s.cfg.Admin.ListUsers(r.Context(), &adminpb.ListUsersRequest{})
	if err != nil {
		return nil, adminError(err)
	}
	for _, u := range resp.Users {
		if u.Name == name {
			return u.Limits, nil
		}
	}
	return nil, notFound()
}

// setLimits replaces the limits of vhost or user name with limits.
func (s accessAPI) setLimits(r *http.Request, key, name string, limits map[string]int64) error {
	ctx := r.Context()
	var err error
	switch {
	case key == "vhost" && len(limits) == 0:
		_, err = s.cfg.Admin.ClearVhostLimits(ctx, &adminpb.VhostRequest{Name: name})
	case key == "vhost":
		def, _ := json.Marshal(limits)
		_, err = s.cfg.Admin.SetVhostLimits(ctx, &adminpb.SetVhostLimitsRequest{Vhost: name, Definition: string(def)})
	case len(limits) == 0:
		_, err = s.cfg.Admin.ClearUserLimits(ctx, &adminpb.ClearUserLimitsRequest{User: name, Limit: "all"})
	default:
		def, _ := json.Marshal(limits)
		_, err = s.cfg.Admin.SetUserLimits(ctx, &adminpb.SetUserLimitsRequest{User: name, Definition: string(def)})
	}
	if err != nil {
		return adminError(err)
	}
	return nil
}

func (s accessAPI) putLimit(key string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		if err := requireAdmin(c); err != nil {
			return err
		}
		var b body
		if err := decodeBody(r, &b); err != nil {
			return err
		}
		if !b.has("value") {
			return badRequest("value is required")
		}
		value, err := b.integer("value", 0)
		if err != nil {
			return err
		}
		name, limit := r.PathValue(key), r.PathValue("limit")
		limits, err := s.currentLimits(r, key, name)
		if err != nil {
			return err
		}
		next := map[string]int64{limit: value}
		for k, v := range limits {
			if k != limit {
				next[k] = v
			}
		}
		if err := s.setLimits(r, key, name, next); err != nil {
			return err
		}
		noContent(w)
		return nil
	}
}

func (s accessAPI) deleteLimit(key string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		if err := requireAdmin(c); err != nil {
			return err
		}
		name, limit := r.PathValue(key), r.PathValue("limit")
		limits, err := s.currentLimits(r, key, name)
		if err != nil {
			return err
		}
		if _, ok := limits[limit]; !ok {
			return notFound()
		}
		next := map[string]int64{}
		for k, v := range limits {
			if k != limit {
				next[k] = v
			}
		}
		if err := s.setLimits(r, key, name, next); err != nil {
			return err
		}
		noContent(w)
		return nil
	}
}
