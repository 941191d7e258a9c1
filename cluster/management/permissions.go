package management

import (
	"net/http"

	"github.com/warrenmq/warren/proto/adminpb"
)

func permissionItem(p *adminpb.Permission) item {
	return item{"user": p.User, "vhost": p.Vhost, "configure": p.Configure, "write": p.Write, "read": p.Read}
}

func (s accessAPI) permissionItems(r *http.Request, vhost, user string) ([]item, error) {
	resp, err := s.cfg.Admin.ListPermissions(r.Context(), &adminpb.ListPermissionsRequest{Vhost: vhost, User: user})
	if err != nil {
		return nil, adminError(err)
	}
	out := make([]item, len(resp.Permissions))
	for i, p := range resp.Permissions {
		out[i] = permissionItem(p)
	}
	return out, nil
}

func (s accessAPI) replyPermissions(w http.ResponseWriter, r *http.Request, c *caller, vhost, user string) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	items, err := s.permissionItems(r, vhost, user)
	if err != nil {
		return err
	}
	replyList(w, r, items, "vhost", "user")
	return nil
}

func (s accessAPI) listPermissions(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.replyPermissions(w, r, c, "", "")
}

func (s accessAPI) listVhostPermissions(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.requireVhost(r.Context(), c, r.PathValue("vhost")); err != nil {
		return err
	}
	return s.replyPermissions(w, r, c, r.PathValue("vhost"), "")
}

func (s accessAPI) listUserPermissions(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	if _, err := s.findUser(r, r.PathValue("user")); err != nil {
		return err
	}
	return s.replyPermissions(w, r, c, "", r.PathValue("user"))
}

func (s accessAPI) getPermission(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	items, err := s.permissionItems(r, r.PathValue("vhost"), r.PathValue("user"))
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return notFound()
	}
	replyItem(w, r, items[0])
	return nil
}

func (s accessAPI) putPermission(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	var b body
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	p := &adminpb.Permission{User: r.PathValue("user"), Vhost: r.PathValue("vhost")}
	for key, dst := range map[string]*string{"configure": &p.Configure, "write": &p.Write, "read": &p.Read} {
		v, err := b.str(key, "")
		if err != nil {
			return err
		}
		if !b.has(key) {
			return badRequest("%s is required", key)
		}
		*dst = v
	}
	if exists, err := s.vhostExists(r.Context(), p.Vhost); err != nil {
		return err
	} else if !exists {
		return notFound()
	}
	if _, err := s.findUser(r, p.User); err != nil {
		return err
	}
	existing, err := s.permissionItems(r, p.Vhost, p.User)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Admin.SetPermissions(r.Context(), p); err != nil {
		return adminError(err)
	}
	created(w, len(existing) == 0)
	return nil
}

func (s accessAPI) deletePermission(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	existing, err := s.permissionItems(r, r.PathValue("vhost"), r.PathValue("user"))
	if err != nil {
		return err
	}
	if len(existing) == 0 {
		return notFound()
	}
	if _, err := s.cfg.Admin.ClearPermissions(r.Context(), &adminpb.ClearPermissionsRequest{User: r.PathValue("user"), Vhost: r.PathValue("vhost")}); err != nil {
		return adminError(err)
	}
	noContent(w)
	return nil
}

// Warren has no topic permissions (a user's permissions are its
// configure, write and read patterns): the listing is empty, a single
// one is not found, and setting one is refused rather than ignored.

func (s accessAPI) listTopicPermissions(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	replyList(w, r, []item{})
	return nil
}

func (s accessAPI) getTopicPermission(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	return notFound()
}

func (s accessAPI) putTopicPermission(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := requireAdmin(c); err != nil {
		return err
	}
	return badRequest("topic permissions are not supported by Warren")
}
