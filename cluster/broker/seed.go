package broker

import (
	"errors"
	"fmt"

	"github.com/warrenmq/warren/cluster/catalog"
)

// Seed is the initial set of users, vhosts and permissions.
type Seed struct {
	Users       []SeedUser
	Vhosts      []string
	Permissions []catalog.Permission
}

// SeedUser is a user given in the config file. Either Password (plain) or
// PasswordHash (RabbitMQ's sha256 layout) is set.
type SeedUser struct {
	Name         string
	Password     string
	PasswordHash string
	Tags         []string
}

// DefaultSeed is what RabbitMQ creates on a fresh node: vhost "/" and
// guest/guest with full access to it.
func DefaultSeed() Seed {
	return Seed{
		Users:       []SeedUser{{Name: "guest", Password: "guest", Tags: []string{"administrator"}}},
		Vhosts:      []string{"/"},
		Permissions: []catalog.Permission{{User: "guest", Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"}},
	}
}

// seed writes a standalone node's first metadata, from the configuration,
// and reads it back.
func (m *metadataApplier) seed(s Seed) (*catalog.Snapshot, error) {
	changes, err := m.seedChanges(s)
	if err != nil {
		return nil, err
	}
	if err := m.b.store.Apply(changes...); err != nil {
		return nil, fmt.Errorf("seed metadata: %w", err)
	}
	m.b.log.Info("seeded metadata on first start", "users", len(s.Users), "vhosts", len(s.Vhosts))
	return m.b.store.Load()
}

// seedChanges are the records s makes.
func (m *metadataApplier) seedChanges(s Seed) ([]catalog.Change, error) {
	var changes []catalog.Change
	for _, u := range s.Users {
		hash := u.PasswordHash
		if hash == "" && u.Password != "" {
			hash = HashPassword(u.Password)
		}
		changes = append(changes, catalog.Put(catalog.User{Name: u.Name, PasswordHash: hash, Tags: u.Tags}))
	}
	for _, v := range s.Vhosts {
		changes = append(changes, catalog.Put(catalog.Vhost{Name: v, DefaultQueueType: m.b.cfg.DefaultQueueType}))
	}
	for _, p := range s.Permissions {
		if _, err := compilePermission(p); err != nil {
			return nil, fmt.Errorf("seed permissions: %w", err)
		}
		changes = append(changes, catalog.Put(p))
	}
	return changes, nil
}

// SeedIfEmpty seeds a new cluster's metadata from the configuration (the
// users, vhosts and permissions of Config.Seed). The node calls it on the
// metadata leader once the cluster has formed; after that the replicated
// store is the truth and the configuration's seed is not read again. Two
// nodes seeding at once cannot both succeed: the first record is created
// only if absent.
func (m *metadataApplier) SeedIfEmpty() error {
	if m.b.HasVhosts() || m.b.hasUsers() {
		return nil
	}
	changes, err := m.seedChanges(m.b.cfg.Seed)
	if err != nil || len(changes) == 0 {
		return err
	}
	changes[0].IfAbsent = true
	if err := m.b.store.Apply(changes...); err != nil {
		if errors.Is(err, catalog.ErrExists) {
			return nil
		}
		return fmt.Errorf("seed metadata: %w", err)
	}
	m.applyChanges(changes)
	m.b.log.Info("seeded the cluster's metadata", "users", len(m.b.cfg.Seed.Users), "vhosts", len(m.b.cfg.Seed.Vhosts))
	return nil
}
