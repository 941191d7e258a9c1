package broker

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// Users and permissions as an operator changes them, as rabbitmqctl's
// add_user, delete_user, change_password, set_user_tags, set_permissions
// and clear_permissions do (vhosts.go has add_vhost and delete_vhost).
// Each change is committed to the metadata store, then applied to this
// node's model (applyChanges, as every other node applies it from the
// store). Deleting a user or a vhost also closes its client connections
// on every node (OnRevoke), as RabbitMQ's connection tracking does.

// Errors of the access operations, wrapped with the name concerned; their
// texts are rabbitmqctl's.
var (
	ErrUserExists  = errors.New("user_already_exists")
	ErrNoUser      = errors.New("no_such_user")
	ErrVhostExists = errors.New("vhost_already_exists")
	ErrNoVhost     = errors.New("no_such_vhost")
	ErrNoAccess    = errors.New("no_such_permissions") // clearing what was never set
	// ErrInvalidAccess: a name or pattern that cannot be used.
	ErrInvalidAccess = errors.New("invalid")
)

// invalidAccess is an ErrInvalidAccess reading as its message alone.
func invalidAccess(format string, args ...any) error {
	return invalidAccessError(fmt.Sprintf(format, args...))
}

type invalidAccessError string

func (e invalidAccessError) Error() string        { return string(e) }
func (e invalidAccessError) Is(target error) bool { return target == ErrInvalidAccess }

// accessControl holds the users and their permissions on each vhost,
// under a lock of its own, and the hook that closes the connections of a
// deleted user or vhost. A vhost checks its permissions here with its own
// lock held, so nothing here takes a vhost's lock.
type accessControl struct {
	// b is the core: changes are committed through it, and a
	// permission's vhost must exist there.
	b *Broker

	mu    sync.RWMutex
	users map[string]catalog.User
	perms map[permKey]*permission
	// revoke closes the connections of a deleted user or vhost.
	revoke func(Revocation)
	// epoch counts changes to users and permissions, so that what a
	// channel cached of them is thrown away at the next change
	// (PermissionsEpoch).
	epoch atomic.Uint64
}

type permKey struct{ user, vhost string }

func (a *accessControl) init(b *Broker) {
	a.b = b
	a.users = make(map[string]catalog.User)
	a.perms = make(map[permKey]*permission)
}

// Revocation says whose client connections lost their right to exist: a
// deleted user's (User set) or those of a deleted vhost (Vhost set).
type Revocation struct {
	User, Vhost string
	// Reason is RabbitMQ's connection.close text for it.
	Reason string
}

// OnRevoke sets what runs when a user or vhost is deleted, by an operator
// here or on another node: the node closes the matching connections. Set
// it before clients connect; fn must not block.
func (a *accessControl) OnRevoke(fn func(Revocation)) {
	a.mu.Lock()
	a.revoke = fn
	a.mu.Unlock()
}

func (a *accessControl) revoked(r Revocation) {
	a.mu.RLock()
	fn := a.revoke
	a.mu.RUnlock()
	if fn != nil {
		fn(r)
	}
}

// AddUser creates a user with a password and tags.
func (a *accessControl) AddUser(name, password string, tags []string) error {
	if name == "" {
		return invalidAccess("a user needs a name")
	}
	err := a.b.commit(catalog.Create(catalog.User{Name: name, PasswordHash: HashPassword(password), Tags: tags}))
	if errors.Is(err, catalog.ErrExists) {
		return fmt.Errorf("%w: %s", ErrUserExists, name)
	}
	if err == nil {
		a.b.log.Info("user added", "user", name, "tags", tags)
	}
	return err
}

// DeleteUser deletes a user and its permissions, and closes its client
// connections on every node.
func (a *accessControl) DeleteUser(name string) error {
	u, ok := a.user(name)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoUser, name)
	}
	changes := []catalog.Change{}
	for _, p := range a.Permissions("", name) {
		changes = append(changes, catalog.Del(p))
	}
	changes = append(changes, catalog.Del(u))
	if err := a.b.commit(changes...); err != nil {
		return err
	}
	a.b.log.Info("user deleted", "user", name)
	return nil
}

// ChangePassword replaces a user's password.
func (a *accessControl) ChangePassword(name, password string) error {
	return a.updateUser(name, func(u *catalog.User) { u.PasswordHash = HashPassword(password) })
}

// SetUserTags replaces a user's tags (none: nil).
func (a *accessControl) SetUserTags(name string, tags []string) error {
	return a.updateUser(name, func(u *catalog.User) { u.Tags = tags })
}

func (a *accessControl) updateUser(name string, change func(*catalog.User)) error {
	u, ok := a.user(name)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoUser, name)
	}
	change(&u)
	if err := a.b.commit(catalog.Put(u)); err != nil {
		return err
	}
	a.b.log.Info("user changed", "user", name, "tags", u.Tags)
	return nil
}

// Users lists the users by name (their password hashes included).
func (a *accessControl) Users() []catalog.User {
	a.mu.RLock()
	out := make([]catalog.User, 0, len(a.users))
	for _, u := range a.users {
		out = append(out, u)
	}
	a.mu.RUnlock()
	slices.SortFunc(out, func(x, y catalog.User) int { return cmp.Compare(x.Name, y.Name) })
	return out
}

// SetPermissions grants p.User access to p.Vhost (configure, write and
// read patterns), replacing what it had there.
func (a *accessControl) SetPermissions(p catalog.Permission) error {
	if _, ok := a.user(p.User); !ok {
		return fmt.Errorf("%w: %s", ErrNoUser, p.User)
	}
	if a.b.vhost(p.Vhost) == nil {
		return fmt.Errorf("%w: %s", ErrNoVhost, p.Vhost)
	}
	if _, err := compilePermission(p); err != nil {
		return invalidAccess("%v", err)
	}
	if err := a.b.commit(catalog.Put(p)); err != nil {
		return err
	}
	a.b.log.Info("permissions set", "user", p.User, "vhost", p.Vhost, "configure", p.Configure, "write", p.Write, "read", p.Read)
	return nil
}

// ClearPermissions takes user's access to vhost away. Its open
// connections there stay, but from now on every operation that needs a
// permission is refused (403 ACCESS_REFUSED), and no new one opens it.
func (a *accessControl) ClearPermissions(user, vhost string) error {
	if _, ok := a.user(user); !ok {
		return fmt.Errorf("%w: %s", ErrNoUser, user)
	}
	if a.b.vhost(vhost) == nil {
		return fmt.Errorf("%w: %s", ErrNoVhost, vhost)
	}
	if len(a.Permissions(vhost, user)) == 0 {
		return fmt.Errorf("%w: user %s in vhost %s", ErrNoAccess, user, vhost)
	}
	if err := a.b.commit(catalog.Del(catalog.Permission{User: user, Vhost: vhost})); err != nil {
		return err
	}
	a.b.log.Info("permissions cleared", "user", user, "vhost", vhost)
	return nil
}

// Permissions lists the permissions of vhost and of user ("" for any), by
// vhost then user.
func (a *accessControl) Permissions(vhost, user string) []catalog.Permission {
	a.mu.RLock()
	var out []catalog.Permission
	for k, p := range a.perms {
		if (vhost == "" || k.vhost == vhost) && (user == "" || k.user == user) {
			out = append(out, p.rec)
		}
	}
	a.mu.RUnlock()
	slices.SortFunc(out, func(x, y catalog.Permission) int {
		return cmp.Or(cmp.Compare(x.Vhost, y.Vhost), cmp.Compare(x.User, y.User))
	})
	return out
}

func (a *accessControl) user(name string) (catalog.User, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	u, ok := a.users[name]
	return u, ok
}

// hasUsers reports whether there is any user.
func (a *accessControl) hasUsers() bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.users) > 0
}

// Permitted reports whether user has any permission on vhost: what
// opening it takes.
func (a *accessControl) Permitted(user, vhost string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	_, ok := a.perms[permKey{user, vhost}]
	return ok
}

// check returns nil when u may perform op on the named resource of vhost.
func (a *accessControl) check(u *User, vhost string, op Access, kind, name string) error {
	a.mu.RLock()
	p := a.perms[permKey{u.Name, vhost}]
	a.mu.RUnlock()
	if p.allows(op, name) {
		return nil
	}
	return wire.Errorf(wire.AccessRefused, "%s access to %s '%s' in vhost '%s' refused for user '%s'", op, kind, name, vhost, u.Name)
}

func compilePermission(p catalog.Permission) (*permission, error) {
	c, err := compilePattern(p.Configure)
	if err != nil {
		return nil, err
	}
	w, err := compilePattern(p.Write)
	if err != nil {
		return nil, err
	}
	r, err := compilePattern(p.Read)
	if err != nil {
		return nil, err
	}
	return &permission{rec: p, configure: c, write: w, read: r}, nil
}

// restoreAccess loads a snapshot's users and permissions, before the
// broker is shared.
func (a *accessControl) restoreAccess(snap *catalog.Snapshot) error {
	for _, u := range snap.Users {
		a.users[u.Name] = u
	}
	for _, p := range snap.Permissions {
		cp, err := compilePermission(p)
		if err != nil {
			return fmt.Errorf("load permission of %s on %s: %w", p.User, p.Vhost, err)
		}
		a.perms[permKey{p.User, p.Vhost}] = cp
	}
	return nil
}

// applyUser applies a committed user record; a deleted user's
// connections are closed.
func (a *accessControl) applyUser(rec catalog.User, del bool) {
	a.mu.Lock()
	_, had := a.users[rec.Name]
	if del {
		delete(a.users, rec.Name)
	} else {
		a.users[rec.Name] = rec
	}
	a.mu.Unlock()
	a.epoch.Add(1) // tags changed too: checks cached on channels are void
	if del && had {
		a.revoked(Revocation{User: rec.Name, Reason: fmt.Sprintf("user '%s' is deleted", rec.Name)})
	}
}

// applyPermission applies a committed permission record.
func (a *accessControl) applyPermission(p catalog.Permission, del bool) {
	a.mu.Lock()
	if del {
		delete(a.perms, permKey{p.User, p.Vhost})
	} else if cp, err := compilePermission(p); err == nil {
		a.perms[permKey{p.User, p.Vhost}] = cp
	} else {
		a.b.log.Warn("ignoring replicated permission", "user", p.User, "vhost", p.Vhost, "err", err)
	}
	a.mu.Unlock()
	a.epoch.Add(1)
}

// PermissionsEpoch changes whenever a user or a permission changes on this
// node (applied from the metadata log). A channel that caches permission
// checks drops them when it moves, so that a revoked permission refuses
// the very next operation that needs it.
func (a *accessControl) PermissionsEpoch() uint64 { return a.epoch.Load() }

// absentFrom appends to gone the deletions of the users and permissions
// that snap lacks (applyReset).
func (a *accessControl) absentFrom(snap *catalog.Snapshot, gone []catalog.Change) []catalog.Change {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for name := range a.users {
		if !slices.ContainsFunc(snap.Users, func(u catalog.User) bool { return u.Name == name }) {
			gone = append(gone, catalog.Del(catalog.User{Name: name}))
		}
	}
	for k := range a.perms {
		if !slices.ContainsFunc(snap.Permissions, func(p catalog.Permission) bool { return p.User == k.user && p.Vhost == k.vhost }) {
			gone = append(gone, catalog.Del(catalog.Permission{User: k.user, Vhost: k.vhost}))
		}
	}
	return gone
}
