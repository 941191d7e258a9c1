package management

import (
	"net/http"
	"strings"

	"github.com/warrenmq/warren/proto/adminpb"
)

func userItem(u *adminpb.User) item {
	tags := u.Tags
	if tags == nil {
		tags = []string{}
	}
	limits := item{}
	for k, v := range u.Limits {
		limits[k] = v
	}
	return item{"name": u.Name, "tags": tags, "limits": limits, "password_hash": "", "hashing_algorithm": "rabbit_password_hashing_sha256"}
}

func (s accessAPI) userItems(r *http.Request) ([]item, error) {
	resp, err := s.cfg.Admin.ListUsers(r.Context(), &adminpb.ListUsersRequest{})
	if err != nil {
		return nil, adminError(err)
	}
	out := make([]item, len(resp.Users))
	for i, u := range resp.Users {
		out[i] = userItem(u)
	}
	return out, nil
}

func (s accessAPI) listUsers(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	items, err := s.userItems(r)
	if err != nil {
		return err
	}
	replyList(w, r, items, "name")
	return nil
}

func (s accessAPI) findUser(r *http.Request, name string) (item, error) {
	items, err := s.userItems(r)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if it["name"] == name {
			return it, nil
		}
	}
	return nil, notFound()
}

func (s accessAPI) getUser(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	it, err := s.findUser(r, r.PathValue("user"))
	if err != nil {
		return err
	}
	replyItem(w, r, it)
	return nil
}

// putUser creates a user or changes its password and tags. tags is a
// list or, as rabbitmqadmin and older clients send it, a comma-separated
// string. A password hash is refused: Warren's users take passwords.
func (s accessAPI) putUser(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	var b body
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	password, err := b.str("password", "")
	if err != nil {
		return err
	}
	if b.has("password_hash") && !b.has("password") {
		return badRequest("password_hash is not supported: give the password")
	}
	if password == "" {
		return badRequest("password is required")
	}
	tags, err := tagsOf(b)
	if err != nil {
		return err
	}
	name := r.PathValue("user")
	ctx := r.Context()
	if _, err := s.findUser(r, name); err != nil {
		if _, err := s.cfg.Admin.AddUser(ctx, &adminpb.AddUserRequest{Name: name, Password: password, Tags: tags}); err != nil {
			return adminError(err)
		}
		created(w, true)
		return nil
	}
	if _, err := s.cfg.Admin.ChangePassword(ctx, &adminpb.ChangePasswordRequest{Name: name, Password: password}); err != nil {
		return adminError(err)
	}
	if _, err := s.cfg.Admin.SetUserTags(ctx, &adminpb.SetUserTagsRequest{Name: name, Tags: tags}); err != nil {
		return adminError(err)
	}
	noContent(w)
	return nil
}

func tagsOf(b body) ([]string, error) {
	var tags []string
	switch v := b["tags"].(type) {
	case nil:
	case string:
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
	case []any:
		for _, t := range v {
			s, ok := t.(string)
			if !ok {
				return nil, badRequest("tags must be strings")
			}
			tags = append(tags, s)
		}
	default:
		return nil, badRequest("tags must be a list or a comma-separated string")
	}
	return tags, nil
}

func (s accessAPI) deleteUser(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	if _, err := s.cfg.Admin.DeleteUser(r.Context(), &adminpb.UserRequest{Name: r.PathValue("user")}); err != nil {
		return adminError(err)
	}
	noContent(w)
	return nil
}
