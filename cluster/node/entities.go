package node

import (
	"errors"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
)

// The admin service's exchanges, bindings and queue operations
// (admin.EntitiesBackend): the broker's, its AMQP refusals told apart.

// entityAdmin answers for exchanges, bindings and queue operations.
type entityAdmin struct{ b *broker.Broker }

func (a entityAdmin) Exchanges(vhost string) []broker.ExchangeInfo { return a.b.Exchanges(vhost) }
func (a entityAdmin) Bindings(vhost string) []broker.BindingInfo   { return a.b.Bindings(vhost) }

func (a entityAdmin) DeleteQueue(vhost, name string, ifUnused, ifEmpty bool) (uint32, error) {
	n, err := a.b.DeleteQueue(vhost, name, ifUnused, ifEmpty)
	return n, queueError(err)
}

func (a entityAdmin) PurgeQueue(vhost, name string) (uint32, error) {
	n, err := a.b.PurgeQueue(vhost, name)
	return n, queueError(err)
}

// queueError tells the admin service what kind of refusal a queue
// operation met: a missing vhost or queue, or a refusal of its flags.
func queueError(err error) error {
	var ae *wire.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, broker.ErrNoVhost):
		return kindError{admin.ErrNotFound, err}
	case errors.As(err, &ae) && ae.Code == wire.NotFound:
		return kindError{admin.ErrNotFound, err}
	case errors.As(err, &ae) && (ae.Code == wire.PreconditionFailed || ae.Code == wire.NotImplemented || ae.Code == wire.ResourceLocked):
		return kindError{admin.ErrRefused, err}
	}
	return err
}
