package server

import (
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster/broker"
)

// The exchange and queue class methods: thin translations to the broker.

func (ch *channel) exchangeDeclare(m *amqp.ExchangeDeclare) error {
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
		ch.reply(&amqp.ExchangeDeclareOk{})
	}
	return nil
}

func (ch *channel) exchangeDelete(m *amqp.ExchangeDelete) error {
	if err := ch.c.vhost.DeleteExchange(ch.c.user, m.Exchange, m.IfUnused); err != nil {
		return err
	}
	delete(ch.canPublish, m.Exchange)
	if !m.NoWait {
		ch.reply(&amqp.ExchangeDeleteOk{})
	}
	return nil
}

func (ch *channel) exchangeBind(m *amqp.ExchangeBind) error {
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
		ch.reply(&amqp.ExchangeBindOk{})
	}
	return nil
}

func (ch *channel) exchangeUnbind(m *amqp.ExchangeUnbind) error {
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
		ch.reply(&amqp.ExchangeUnbindOk{})
	}
	return nil
}

func (ch *channel) queueDeclare(m *amqp.QueueDeclare) error {
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
		ch.reply(&amqp.QueueDeclareOk{Queue: q.Name(), MessageCount: st.Ready, ConsumerCount: st.Consumers})
	}
	return nil
}

// binding resolves queue.bind/unbind's shortcuts: an empty queue name is
// the last declared queue, and then an empty routing key is its name too.
func (ch *channel) binding(queueName, exchange, key string, args amqp.Table) (broker.QueueBinding, error) {
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

func (ch *channel) queueBind(m *amqp.QueueBind) error {
	b, err := ch.binding(m.Queue, m.Exchange, m.RoutingKey, m.Arguments)
	if err != nil {
		return err
	}
	if err := ch.c.vhost.BindQueue(ch.c.user, ch.c.owner, b); err != nil {
		return err
	}
	if !m.NoWait {
		ch.reply(&amqp.QueueBindOk{})
	}
	return nil
}

func (ch *channel) queueUnbind(m *amqp.QueueUnbind) error {
	b, err := ch.binding(m.Queue, m.Exchange, m.RoutingKey, m.Arguments)
	if err != nil {
		return err
	}
	if err := ch.c.vhost.UnbindQueue(ch.c.user, ch.c.owner, b); err != nil {
		return err
	}
	ch.reply(&amqp.QueueUnbindOk{})
	return nil
}

func (ch *channel) queuePurge(m *amqp.QueuePurge) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	n, err := ch.c.vhost.PurgeQueue(ch.c.user, ch.c.owner, name)
	if err != nil {
		return err
	}
	if !m.NoWait {
		ch.reply(&amqp.QueuePurgeOk{MessageCount: n})
	}
	return nil
}

func (ch *channel) queueDelete(m *amqp.QueueDelete) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	n, err := ch.c.vhost.DeleteQueue(ch.c.user, ch.c.owner, name, m.IfUnused, m.IfEmpty)
	if err != nil {
		return err
	}
	if !m.NoWait {
		ch.reply(&amqp.QueueDeleteOk{MessageCount: n})
	}
	return nil
}
