package admin

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/proto/adminpb"
)

// Users, vhosts and permissions. They live in the metadata group, so the
// answering node commits a change itself and reads listings from its own
// copy; what other nodes must do (close a deleted user's connections)
// they do as the change reaches them.

// AccessBackend is what a Backend offers for users, vhosts and
// permissions. A Backend without it answers Unimplemented. Each change
// returns once committed and applied on this node; its error wraps
// ErrExists, ErrNotFound or ErrInvalid when the request is at fault, and
// reads as rabbitmqctl's text.
type AccessBackend interface {
	AddUser(name, password string, tags []string) error
	DeleteUser(name string) error
	ChangePassword(name, password string) error
	SetUserTags(name string, tags []string) error
	// SetUserLimits reads definition as rabbitmqctl set_user_limits does
	// and replaces the user's limits with it; ClearUserLimit removes the
	// one named, or all of them for "all".
	SetUserLimits(user, definition string) error
	ClearUserLimit(user, limit string) error
	Users() []catalog.User
	AddVhost(name, defaultQueueType string) error
	DeleteVhost(name string) error
	// SetVhostLimits reads definition as rabbitmqctl set_vhost_limits
	// does and replaces the vhost's limits with it; an empty definition
	// clears them.
	SetVhostLimits(vhost, definition string) error
	Vhosts() []catalog.Vhost
	SetPermissions(p catalog.Permission) error
	ClearPermissions(user, vhost string) error
	Permissions(vhost, user string) []catalog.Permission
}

// ErrExists: what an access change would create exists already.
var ErrExists = errors.New("already exists")

func (s *Server) access() (AccessBackend, error) {
	return optional[AccessBackend](s, "users, vhosts and permissions are")
}

// accessChange makes a change through the access backend and answers it.
func (s *Server) accessChange(change func(AccessBackend) error) (*adminpb.AccessResponse, error) {
	ab, err := s.access()
	if err != nil {
		return nil, err
	}
	if err := change(ab); err != nil {
		return nil, statusOf(err, codes.Unavailable)
	}
	return &adminpb.AccessResponse{}, nil
}

// AddUser implements adminpb.AdminServer.
func (s *Server) AddUser(_ context.Context, req *adminpb.AddUserRequest) (*adminpb.AccessResponse, error) {
	return s.accessChange(func(ab AccessBackend) error { return ab.AddUser(req.Name, req.Password, req.Tags) })
}

// DeleteUser implements adminpb.AdminServer.
func (s *Server) DeleteUser(_ context.Context, req *adminpb.UserRequest) (*adminpb.AccessResponse, error) {
	return s.accessChange(func(ab AccessBackend) error { return ab.DeleteUser(req.Name) })
}

// ChangePassword implements adminpb.AdminServer.
func (s *Server) ChangePassword(_ context.Context, req *adminpb.ChangePasswordRequest) (*adminpb.AccessResponse, error) {
	return s.accessChange(func(ab AccessBackend) error { return ab.ChangePassword(req.Name, req.Password) })
}

// SetUserTags implements adminpb.AdminServer.
func (s *Server) SetUserTags(_ context.Context, req *adminpb.SetUserTagsRequest) (*adminpb.AccessResponse, error) {
	return s.accessChange(func(ab AccessBackend) error { return ab.SetUserTags(req.Name, req.Tags) })
}

// ListUsers implements adminpb.AdminServer.
func (s *Server) ListUsers(context.Context, *adminpb.ListUsersRequest) (*adminpb.ListUsersResponse, error) {
	ab, err := s.access()
	if err != nil {
		return nil, err
	}
	resp := &adminpb.ListUsersResponse{}
	for _, u := range ab.Users() {
		resp.Users = append(resp.Users, &adminpb.User{Name: u.Name, Tags: u.Tags, HasPassword: u.PasswordHash != "", Limits: u.Limits})
	}
	return resp, nil
}

// AddVhost implements adminpb.AdminServer.
func (s *Server) AddVhost(_ context.Context, req *adminpb.AddVhostRequest) (*adminpb.AccessResponse, error) {
	return s.accessChange(func(ab AccessBackend) error { return ab.AddVhost(req.Name, req.DefaultQueueType) })
}

// DeleteVhost implements adminpb.AdminServer.
func (s *Server) DeleteVhost(_ context.Context, req *adminpb.VhostRequest) (*adminpb.AccessResponse, error) {
	return s.accessChange(func(ab AccessBackend) error { return ab.DeleteVhost(req.Name) })
}

// SetUserLimits implements adminpb.AdminServer.
func (s *Server) SetUserLimits(_ context.Context, req *adminpb.SetUserLimitsRequest) (*adminpb.AccessResponse, error) {
	if req.Definition == "" {
		return nil, statusOf(Invalid("a limits definition is needed (a JSON object)"), codes.InvalidArgument)
	}
	return s.accessChange(func(ab AccessBackend) error { return ab.SetUserLimits(req.User, req.Definition) })
}

// ClearUserLimits implements adminpb.AdminServer.
func (s *Server) ClearUserLimits(_ context.Context, req *adminpb.ClearUserLimitsRequest) (*adminpb.AccessResponse, error) {
	return s.accessChange(func(ab AccessBackend) error { return ab.ClearUserLimit(req.User, req.Limit) })
}

// SetVhostLimits implements adminpb.AdminServer.
func (s *Server) SetVhostLimits(_ context.Context, req *adminpb.SetVhostLimitsRequest) (*adminpb.AccessResponse, error) {
	if req.Definition == "" {
		return nil, statusOf(Invalid("a limits definition is needed (a JSON object)"), codes.InvalidArgument)
	}
	return s.accessChange(func(ab AccessBackend) error { return ab.SetVhostLimits(vhostOr(req.Vhost), req.Definition) })
}

// ClearVhostLimits implements adminpb.AdminServer.
func (s *Server) ClearVhostLimits(_ context.Context, req *adminpb.VhostRequest) (*adminpb.AccessResponse, error) {
	return s.accessChange(func(ab AccessBackend) error { return ab.SetVhostLimits(vhostOr(req.Name), "") })
}

// vhostOr is vhost, or "/" for none.
func vhostOr(vhost string) string {
	if vhost == "" {
		return "/"
	}
	return vhost
}

// ListVhosts implements adminpb.AdminServer.
func (s *Server) ListVhosts(context.Context, *adminpb.ListVhostsRequest) (*adminpb.ListVhostsResponse, error) {
	ab, err := s.access()
	if err != nil {
		return nil, err
	}
	resp := &adminpb.ListVhostsResponse{}
	for _, v := range ab.Vhosts() {
		resp.Vhosts = append(resp.Vhosts, &adminpb.Vhost{Name: v.Name, DefaultQueueType: v.DefaultQueueType, Limits: v.Limits})
	}
	return resp, nil
}

// SetPermissions implements adminpb.AdminServer.
func (s *Server) SetPermissions(_ context.Context, req *adminpb.Permission) (*adminpb.AccessResponse, error) {
	return s.accessChange(func(ab AccessBackend) error {
		return ab.SetPermissions(catalog.Permission{User: req.User, Vhost: req.Vhost, Configure: req.Configure, Write: req.Write, Read: req.Read})
	})
}

// ClearPermissions implements adminpb.AdminServer.
func (s *Server) ClearPermissions(_ context.Context, req *adminpb.ClearPermissionsRequest) (*adminpb.AccessResponse, error) {
	return s.accessChange(func(ab AccessBackend) error { return ab.ClearPermissions(req.User, req.Vhost) })
}

// ListPermissions implements adminpb.AdminServer.
func (s *Server) ListPermissions(_ context.Context, req *adminpb.ListPermissionsRequest) (*adminpb.ListPermissionsResponse, error) {
	ab, err := s.access()
	if err != nil {
		return nil, err
	}
	resp := &adminpb.ListPermissionsResponse{}
	for _, p := range ab.Permissions(req.Vhost, req.User) {
		resp.Permissions = append(resp.Permissions, &adminpb.Permission{User: p.User, Vhost: p.Vhost, Configure: p.Configure, Write: p.Write, Read: p.Read})
	}
	return resp, nil
}
