package broker

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/warrenmq/warren/cluster/catalog"
)

// Users, vhosts and permissions as an operator changes them, as
// rabbitmqctl's add_user, delete_user, change_password, set_user_tags,
// add_vhost, delete_vhost, set_permissions and clear_permissions do. Each
// change is committed to the metadata store, then applied to this node's
// model (applyChanges, as every other node applies it from the store).
// Deleting a user or a vhost also closes its client connections on every
// node (OnRevoke), as RabbitMQ's connection tracking does.

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
func (b *Broker) OnRevoke(fn func(Revocation)) {
	b.mu.Lock()
	b.revoke = fn
	b.mu.Unlock()
}

func (b *Broker) revoked(r Revocation) {
	b.mu.RLock()
	fn := b.revoke
	b.mu.RUnlock()
	if fn != nil {
		fn(r)
	}
}

// commit stores changes and applies them to this node's model.
func (b *Broker) commit(changes ...catalog.Change) error {
	if err := b.store.Apply(changes...); err != nil {
		if errors.Is(err, catalog.ErrExists) {
			return err
		}
		b.log.Error("metadata store write failed", "err", err)
		return fmt.Errorf("metadata store write failed: %w", err)
	}
	b.applyChanges(changes)
	return nil
}

// AddUser creates a user with a password and tags.
func (b *Broker) AddUser(name, password string, tags []string) error {
	if name == "" {
		return invalidAccess("a user needs a name")
	}
	err := b.commit(catalog.Create(catalog.User{Name: name, PasswordHash: HashPassword(password), Tags: tags}))
	if errors.Is(err, catalog.ErrExists) {
		return fmt.Errorf("%w: %s", ErrUserExists, name)
	}
	if err == nil {
		b.log.Info("user added", "user", name, "tags", tags)
	}
	return err
}

// DeleteUser deletes a user and its permissions, and closes its client
// connections on every node.
func (b *Broker) DeleteUser(name string) error {
	u, ok := b.user(name)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoUser, name)
	}
	changes := []catalog.Change{}
	for _, p := range b.Permissions("", name) {
		changes = append(changes, catalog.Del(p))
	}
	changes = append(changes, catalog.Del(u))
	if err := b.commit(changes...); err != nil {
		return err
	}
	b.log.Info("user deleted", "user", name)
	return nil
}

// ChangePassword replaces a user's password.
func (b *Broker) ChangePassword(name, password string) error {
	return b.updateUser(name, func(u *catalog.User) { u.PasswordHash = HashPassword(password) })
}

// SetUserTags replaces a user's tags (none: nil).
func (b *Broker) SetUserTags(name string, tags []string) error {
	return b.updateUser(name, func(u *catalog.User) { u.Tags = tags })
}

func (b *Broker) updateUser(name string, change func(*catalog.User)) error {
	u, ok := b.user(name)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoUser, name)
	}
	change(&u)
	if err := b.commit(catalog.Put(u)); err != nil {
		return err
	}
	b.log.Info("user changed", "user", name, "tags", u.Tags)
	return nil
}

// Users lists the users by name (their password hashes included).
func (b *Broker) Users() []catalog.User {
	b.mu.RLock()
	out := make([]catalog.User, 0, len(b.users))
	for _, u := range b.users {
		out = append(out, u)
	}
	b.mu.RUnlock()
	slices.SortFunc(out, func(a, b catalog.User) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// AddVhost creates a vhost whose durable queues declared without
// x-queue-type get defaultQueueType ("" for the node's default).
func (b *Broker) AddVhost(name, defaultQueueType string) error {
	if name == "" {
		return invalidAccess("a vhost needs a name")
	}
	if defaultQueueType == "" {
		defaultQueueType = b.cfg.DefaultQueueType
	}
	if defaultQueueType != QueueTypeQuorum && defaultQueueType != QueueTypeClassic {
		return invalidAccess("default queue type %q: quorum or classic", defaultQueueType)
	}
	err := b.commit(catalog.Create(catalog.Vhost{Name: name, DefaultQueueType: defaultQueueType}))
	if errors.Is(err, catalog.ErrExists) {
		return fmt.Errorf("%w: %s", ErrVhostExists, name)
	}
	if err == nil {
		b.log.Info("vhost added", "vhost", name, "default_queue_type", defaultQueueType)
	}
	return err
}

// DeleteVhost deletes a vhost with everything in it: its queues (their
// messages and, for quorum queues, their Raft groups on every member),
// exchanges, bindings, policies and permissions; its client connections
// on every node are closed. The records go in one committed change, so no
// node sees part of the vhost gone; a second pass takes what was declared
// in it while the first was being committed.
func (b *Broker) DeleteVhost(name string) error {
	for pass := 0; pass < 2; pass++ {
		b.catchUp() // what other nodes committed in the vhost goes too
		snap, err := b.store.Load()
		if err != nil {
			return fmt.Errorf("read the metadata: %w", err)
		}
		changes := vhostRecords(snap, name)
		if pass == 0 && !slices.ContainsFunc(snap.Vhosts, func(v catalog.Vhost) bool { return v.Name == name }) {
			return fmt.Errorf("%w: %s", ErrNoVhost, name)
		}
		if len(changes) == 0 {
			break
		}
		if err := b.commit(changes...); err != nil {
			return err
		}
		if pass == 0 {
			b.log.Info("vhost deleted", "vhost", name, "records", len(changes))
		}
	}
	return nil
}

// vhostRecords are deletions of every record of vhost name in snap:
// bindings, then what they connect, then the vhost (removalRank).
func vhostRecords(snap *catalog.Snapshot, name string) []catalog.Change {
	var out []catalog.Change
	out = deletions(out, snap.Bindings, func(r catalog.Binding) bool { return r.Vhost == name })
	out = deletions(out, snap.Queues, func(r catalog.Queue) bool { return r.Vhost == name })
	out = deletions(out, snap.Exchanges, func(r catalog.Exchange) bool { return r.Vhost == name })
	out = deletions(out, snap.Policies, func(r catalog.Policy) bool { return r.Vhost == name })
	out = deletions(out, snap.Permissions, func(r catalog.Permission) bool { return r.Vhost == name })
	out = deletions(out, snap.Vhosts, func(r catalog.Vhost) bool { return r.Name == name })
	slices.SortStableFunc(out, func(a, b catalog.Change) int { return removalRank(a) - removalRank(b) })
	return out
}

// deletions appends to out the deletion of each record of recs that in
// selects.
func deletions[T any](out []catalog.Change, recs []T, in func(T) bool) []catalog.Change {
	for _, r := range recs {
		if in(r) {
			out = append(out, catalog.Del(r))
		}
	}
	return out
}

// Vhosts lists the vhosts by name.
func (b *Broker) Vhosts() []catalog.Vhost {
	b.mu.RLock()
	vhosts := slices.Collect(maps.Values(b.vhosts))
	b.mu.RUnlock()
	out := make([]catalog.Vhost, 0, len(vhosts))
	for _, v := range vhosts {
		v.mu.RLock()
		out = append(out, catalog.Vhost{Name: v.name, DefaultQueueType: v.defaultQueueType, Limits: maps.Clone(v.limits)})
		v.mu.RUnlock()
	}
	slices.SortFunc(out, func(a, b catalog.Vhost) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// SetPermissions grants p.User access to p.Vhost (configure, write and
// read patterns), replacing what it had there.
func (b *Broker) SetPermissions(p catalog.Permission) error {
	if _, ok := b.user(p.User); !ok {
		return fmt.Errorf("%w: %s", ErrNoUser, p.User)
	}
	if b.vhost(p.Vhost) == nil {
		return fmt.Errorf("%w: %s", ErrNoVhost, p.Vhost)
	}
	if _, err := compilePermission(p); err != nil {
		return invalidAccess("%v", err)
	}
	if err := b.commit(catalog.Put(p)); err != nil {
		return err
	}
	b.log.Info("permissions set", "user", p.User, "vhost", p.Vhost, "configure", p.Configure, "write", p.Write, "read", p.Read)
	return nil
}

// ClearPermissions takes user's access to vhost away. Its open
// connections there stay, but from now on every operation that needs a
// permission is refused (403 ACCESS_REFUSED), and no new one opens it.
func (b *Broker) ClearPermissions(user, vhost string) error {
	if _, ok := b.user(user); !ok {
		return fmt.Errorf("%w: %s", ErrNoUser, user)
	}
	if b.vhost(vhost) == nil {
		return fmt.Errorf("%w: %s", ErrNoVhost, vhost)
	}
	if len(b.Permissions(vhost, user)) == 0 {
		return fmt.Errorf("%w: user %s in vhost %s", ErrNoAccess, user, vhost)
	}
	if err := b.commit(catalog.Del(catalog.Permission{User: user, Vhost: vhost})); err != nil {
		return err
	}
	b.log.Info("permissions cleared", "user", user, "vhost", vhost)
	return nil
}

// Permissions lists the permissions of vhost and of user ("" for any), by
// vhost then user.
func (b *Broker) Permissions(vhost, user string) []catalog.Permission {
	b.mu.RLock()
	var out []catalog.Permission
	for k, p := range b.perms {
		if (vhost == "" || k.vhost == vhost) && (user == "" || k.user == user) {
			out = append(out, p.rec)
		}
	}
	b.mu.RUnlock()
	slices.SortFunc(out, func(a, b catalog.Permission) int {
		return cmp.Or(cmp.Compare(a.Vhost, b.Vhost), cmp.Compare(a.User, b.User))
	})
	return out
}

// PermissionsEpoch changes whenever a user or a permission changes on this
// node (applied from the metadata log). A channel that caches permission
// checks drops them when it moves, so that a revoked permission refuses
// the very next operation that needs it.
func (b *Broker) PermissionsEpoch() uint64 { return b.permEpoch.Load() }
