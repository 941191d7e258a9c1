package node

import (
	"errors"

	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/catalog"
)

// The admin service's users, vhosts and permissions (admin.AccessBackend):
// the broker's, with its errors told apart for the service.

// accessAdmin answers for users, vhosts and permissions.
type accessAdmin struct{ b *broker.Broker }

func (a accessAdmin) AddUser(name, password string, tags []string) error {
	return accessError(a.b.AddUser(name, password, tags))
}
func (a accessAdmin) DeleteUser(name string) error { return accessError(a.b.DeleteUser(name)) }
func (a accessAdmin) ChangePassword(name, password string) error {
	return accessError(a.b.ChangePassword(name, password))
}
func (a accessAdmin) SetUserTags(name string, tags []string) error {
	return accessError(a.b.SetUserTags(name, tags))
}
func (a accessAdmin) Users() []catalog.User { return a.b.Users() }
func (a accessAdmin) AddVhost(name, defaultQueueType string) error {
	return accessError(a.b.AddVhost(name, defaultQueueType))
}
func (a accessAdmin) DeleteVhost(name string) error { return accessError(a.b.DeleteVhost(name)) }
func (a accessAdmin) Vhosts() []catalog.Vhost       { return a.b.Vhosts() }
func (a accessAdmin) SetUserLimits(user, definition string) error {
	limits, err := broker.ParseUserLimits(definition)
	if err != nil {
		return accessError(err)
	}
	return accessError(a.b.SetUserLimits(user, limits))
}
func (a accessAdmin) ClearUserLimit(user, limit string) error {
	return accessError(a.b.ClearUserLimit(user, limit))
}
func (a accessAdmin) SetVhostLimits(vhost, definition string) error {
	var limits map[string]int64
	if definition != "" {
		var err error
		if limits, err = broker.ParseVhostLimits(definition); err != nil {
			return accessError(err)
		}
	}
	return accessError(a.b.SetVhostLimits(vhost, limits))
}
func (a accessAdmin) SetPermissions(p catalog.Permission) error {
	return accessError(a.b.SetPermissions(p))
}
func (a accessAdmin) ClearPermissions(user, vhost string) error {
	return accessError(a.b.ClearPermissions(user, vhost))
}
func (a accessAdmin) Permissions(vhost, user string) []catalog.Permission {
	return a.b.Permissions(vhost, user)
}

// accessError tells the admin service what kind of failure a user, vhost
// or permission change met.
func accessError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, broker.ErrUserExists), errors.Is(err, broker.ErrVhostExists):
		return kindError{admin.ErrExists, err}
	case errors.Is(err, broker.ErrNoUser), errors.Is(err, broker.ErrNoVhost), errors.Is(err, broker.ErrNoAccess):
		return kindError{admin.ErrNotFound, err}
	case errors.Is(err, broker.ErrInvalidAccess):
		return admin.Invalid(err.Error())
	}
	return err
}

// kindError is err, read as its own text, that is also of kind (an admin
// error the service answers with its code).
type kindError struct{ kind, err error }

func (e kindError) Error() string   { return e.err.Error() }
func (e kindError) Unwrap() []error { return []error{e.kind, e.err} }
