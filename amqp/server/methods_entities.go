package server

import (
	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/broker"
)

// The exchange and queue class methods: thin translations to the broker.

func (ch *channel) exchangeDeclare(m *wire.ExchangeDeclare) error {
	err := ch.c.vhost.DeclareExchange(ch.c.user, broker.ExchangeDeclare{
		Name:       m.Exchange,
		Type:       m.Type,
		Passive:    m.Passive,
		Durable:    m.Durable,
		AutoDelete: m.AutoDelete,
		Internal:   m.Internal,
		Arguments:  m.Arguments,
	})
	if err != nil {
		return err
	}
	if !m.NoWait {
		ch.reply(&wire.ExchangeDeclareOk{})
	}
	return nil
}

func (ch *channel) exchangeDelete(m *wire.ExchangeDelete) error {
	if err := ch.c.vhost.DeleteExchange(ch.c.user, m.Exchange, m.IfUnused); err != nil {
		return err
	}
	delete(ch.canPublish, m.Exchange)
	if !m.NoWait {
		ch.reply(&wire.ExchangeDeleteOk{})
	}
	return nil
}

func (ch *channel) exchangeBind(m *wire.ExchangeBind) error {
	err := ch.c.vhost.BindExchange(ch.c.user, broker.ExchangeBinding{
		Destination: m.Destination,
		Source:      m.Source,
		RoutingKey:  m.RoutingKey,
		Arguments:   m.Arguments,
	})
	if err != nil {
		return err
	}
	if !m.NoWait {
		ch.reply(&wire.ExchangeBindOk{})
	}
	return nil
}

func (ch *channel) exchangeUnbind(m *wire.ExchangeUnbind) error {
	err := ch.c.vhost.UnbindExchange(ch.c.user, broker.ExchangeBinding{
		Destination: m.Destination,
		Source:      m.Source,
		RoutingKey:  m.RoutingKey,
		Arguments:   m.Arguments,
	})
	if err != nil {
		return err
	}
	if !m.NoWait {
		ch.reply(&wire.ExchangeUnbindOk{})
	}
	return nil
}

func (ch *channel) queueDeclare(m *wire.QueueDeclare) error {
	if done, err := ch.declareReplyTo(m); done {
		return err
	}
	name := m.Queue
	if name == "" && m.Passive {
		var err error
		if name, err = ch.queueName(name); err != nil {
			return err
		}
	}
	q, st, err := ch.c.vhost.DeclareQueue(ch.c.user, ch.c.owner, broker.QueueDeclare{
		Name:       name,
		Passive:    m.Passive,
		Durable:    m.Durable,
		Exclusive:  m.Exclusive,
		AutoDelete: m.AutoDelete,
		Arguments:  m.Arguments,
	})
	if err != nil {
		return err
	}
	ch.lastQueue = q.Name()
	if !m.NoWait {
		ch.reply(&wire.QueueDeclareOk{Queue: q.Name(), MessageCount: st.Ready, ConsumerCount: st.Consumers})
	}
	return nil
}

// binding resolves queue.bind/unbind's shortcuts: an empty queue name is
// the last declared queue, and then an empty routing key is its name too.
func (ch *channel) binding(queueName, exchange, key string, args wire.Table) (broker.QueueBinding, error) {
	if queueName == "" {
		name, err := ch.queueName(queueName)
		if err != nil {
			return broker.QueueBinding{}, err
		}
		queueName = name
		if key == "" {
			key = name
		}
	}
	return broker.QueueBinding{Queue: queueName, Exchange: exchange, RoutingKey: key, Arguments: args}, nil
}

func (ch *channel) queueBind(m *wire.QueueBind) error {
	b, err := ch.binding(m.Queue, m.Exchange, m.RoutingKey, m.Arguments)
	if err != nil {
		return err
	}
	if err := ch.c.vhost.BindQueue(ch.c.user, ch.c.owner, b); err != nil {
		return err
	}
	if !m.NoWait {
		ch.reply(&wire.QueueBindOk{})
	}
	return nil
}

func (ch *channel) queueUnbind(m *wire.QueueUnbind) error {
	b, err := ch.binding(m.Queue, m.Exchange, m.RoutingKey, m.Arguments)
	if err != nil {
		return err
	}
	if err := ch.c.vhost.UnbindQueue(ch.c.user, ch.c.owner, b); err != nil {
		return err
	}
	ch.reply(&wire.QueueUnbindOk{})
	return nil
}

func (ch *channel) queuePurge(m *wire.QueuePurge) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	n, err := ch.c.vhost.PurgeQueue(ch.c.user, ch.c.owner, name)
	if err != nil {
		return err
	}
	if !m.NoWait {
		ch.reply(&wire.QueuePurgeOk{MessageCount: n})
	}
	return nil
}

func (ch *channel) queueDelete(m *wire.QueueDelete) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	n, err := ch.c.vhost.DeleteQueue(ch.c.user, ch.c.owner, name, m.IfUnused, m.IfEmpty)
	if err != nil {
		return err
	}
	if !m.NoWait {
		ch.reply(&wire.QueueDeleteOk{MessageCount: n})
	}
	return nil
}
