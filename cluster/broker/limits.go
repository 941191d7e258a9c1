package broker

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// Vhost and user limits, as RabbitMQ's rabbit_vhost_limit and
// rabbit_auth_backend_internal's: at most so many client connections to a
// vhost across the cluster and so many queues in it; at most so many
// connections and channels of a user across the cluster. rabbitmqctl
// set_vhost_limits and set_user_limits replace them with a JSON object; a
// limit of 0 allows none, a negative one is no limit.

// The limits, by RabbitMQ's names: a vhost's max-connections and
// max-queues, a user's max-connections and max-channels.
const (
	LimitMaxConnections = "max-connections"
	LimitMaxQueues      = "max-queues"
	LimitMaxChannels    = "max-channels"
)

// ParseVhostLimits reads a limits definition as rabbitmqctl
// set_vhost_limits takes it (a JSON object of integers, keys
// max-connections and max-queues), dropping negative values (no limit),
// as RabbitMQ's validation does. The error reads as RabbitMQ's.
func ParseVhostLimits(definition string) (map[string]int64, error) {
	return parseLimits(definition, LimitMaxConnections, LimitMaxQueues)
}

// ParseUserLimits reads a user's limits as rabbitmqctl set_user_limits
// takes them (keys max-connections and max-channels), as
// ParseVhostLimits does a vhost's.
func ParseUserLimits(definition string) (map[string]int64, error) {
	return parseLimits(definition, LimitMaxConnections, LimitMaxChannels)
}

func parseLimits(definition string, known ...string) (map[string]int64, error) {
	var raw map[string]any
	dec := json.NewDecoder(strings.NewReader(definition))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, invalidAccess("could not parse JSON document: %v", err)
	}
	var unknown []string
	for k := range raw {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, invalidAccess("Unrecognised terms %v in limits", unknown)
	}
	limits := map[string]int64{}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		n, ok := raw[k].(json.Number)
		i, err := n.Int64()
		if !ok || err != nil {
			return nil, invalidAccess("%s should be a number, actually was %v", k, raw[k])
		}
		if i >= 0 {
			limits[k] = i
		}
	}
	return limits, nil
}

// SetVhostLimits replaces vhost's limits (ParseVhostLimits) and returns
// once the change is committed; every node enforces them from then on.
// Connections and queues already over a new limit stay.
func (t *vhostTable) SetVhostLimits(vhost string, limits map[string]int64) error {
	v := t.vhost(vhost)
	if v == nil {
		return fmt.Errorf("%w: %s", ErrNoVhost, vhost)
	}
	if len(limits) == 0 {
		limits = nil
	}
	if err := t.b.commit(catalog.Put(catalog.Vhost{Name: vhost, DefaultQueueType: v.defaultQueueType, Limits: limits})); err != nil {
		return err
	}
	t.b.log.Info("vhost limits set", "vhost", vhost, "limits", limits)
	return nil
}

// VhostLimits are vhost's limits; nil if it has none (or no such vhost).
func (t *vhostTable) VhostLimits(vhost string) map[string]int64 {
	v := t.vhost(vhost)
	if v == nil {
		return nil
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	return maps.Clone(v.limits)
}

// Limit is the vhost's limit key and whether it has one.
func (v *Vhost) Limit(key string) (int64, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	n, ok := v.limits[key]
	return n, ok
}

// checkQueueLimitLocked refuses a new queue name in a vhost whose queue
// limit is reached: 406, as rabbit_queue_type's check words it. v.mu
// held.
func (v *Vhost) checkQueueLimitLocked(name string) error {
	if n, ok := v.limits[LimitMaxQueues]; ok && int64(len(v.queues)) >= n {
		return wire.Errorf(wire.PreconditionFailed, "cannot declare queue '%s': queue limit in vhost '%s' (%d) is reached", name, v.name, n)
	}
	return nil
}

// SetUserLimits replaces user's limits (ParseUserLimits) and returns once
// the change is committed. Connections and channels already over a new
// limit stay.
func (a *accessControl) SetUserLimits(user string, limits map[string]int64) error {
	if len(limits) == 0 {
		limits = nil
	}
	if err := a.updateUser(user, func(u *catalog.User) { u.Limits = limits }); err != nil {
		return err
	}
	a.b.log.Info("user limits set", "user", user, "limits", limits)
	return nil
}

// UserLimit is user's limit key and whether it has one.
func (a *accessControl) UserLimit(user, key string) (int64, bool) {
	u, ok := a.user(user)
	if !ok {
		return 0, false
	}
	n, ok := u.Limits[key]
	return n, ok
}

// ClearUserLimit removes user's limit named limit, or every one for
// "all", as rabbitmqctl clear_user_limits.
func (a *accessControl) ClearUserLimit(user, limit string) error {
	if limit != "all" && limit != LimitMaxConnections && limit != LimitMaxChannels {
		return invalidAccess("no such limit '%s' (max-connections, max-channels or all)", limit)
	}
	u, ok := a.user(user)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoUser, user)
	}
	limits := maps.Clone(u.Limits)
	if limit == "all" {
		limits = nil
	} else {
		delete(limits, limit)
	}
	return a.SetUserLimits(user, limits)
}
