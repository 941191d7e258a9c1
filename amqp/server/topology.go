package server

import (
	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/broker"
)

// topology carries out a channel's exchange and queue class methods, thin
// translations to the broker, run by the reader under channel.op. It
// owns the name of the queue the channel declared last, which an empty
// queue name stands for in the methods that follow.
type topology struct {
	ch        *channel
	lastQueue string
}

func (t *topology) exchangeDeclare(m *wire.ExchangeDeclare) error {
	ch := t.ch
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

func (t *topology) exchangeDelete(m *wire.ExchangeDelete) error {
	ch := t.ch
	if err := ch.c.vhost.DeleteExchange(ch.c.user, m.Exchange, m.IfUnused); err != nil {
		return err
	}
	ch.pub.forgetExchange(m.Exchange)
	if !m.NoWait {
		ch.reply(&wire.ExchangeDeleteOk{})
	}
	return nil
}

func (t *topology) exchangeBind(m *wire.ExchangeBind) error {
	ch := t.ch
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

func (t *topology) exchangeUnbind(m *wire.ExchangeUnbind) error {
	ch := t.ch
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

func (t *topology) queueDeclare(m *wire.QueueDeclare) error {
	ch := t.ch
	if done, err := t.declareReplyTo(m); done {
		return err
	}
	name := m.Queue
	if name == "" && m.Passive {
		var err error
		if name, err = t.queueName(name); err != nil {
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
	t.lastQueue = q.Name()
	if !m.NoWait {
		ch.reply(&wire.QueueDeclareOk{Queue: q.Name(), MessageCount: st.Ready, ConsumerCount: st.Consumers})
	}
	return nil
}

// binding resolves queue.bind/unbind's shortcuts: an empty queue name is
// the last declared queue, and then an empty routing key is its name too.
func (t *topology) binding(queueName, exchange, key string, args wire.Table) (broker.QueueBinding, error) {
	if queueName == "" {
		name, err := t.queueName(queueName)
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

func (t *topology) queueBind(m *wire.QueueBind) error {
	ch := t.ch
	b, err := t.binding(m.Queue, m.Exchange, m.RoutingKey, m.Arguments)
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

func (t *topology) queueUnbind(m *wire.QueueUnbind) error {
	ch := t.ch
	b, err := t.binding(m.Queue, m.Exchange, m.RoutingKey, m.Arguments)
	if err != nil {
		return err
	}
	if err := ch.c.vhost.UnbindQueue(ch.c.user, ch.c.owner, b); err != nil {
		return err
	}
	ch.reply(&wire.QueueUnbindOk{})
	return nil
}

func (t *topology) queuePurge(m *wire.QueuePurge) error {
	ch := t.ch
	name, err := t.queueName(m.Queue)
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

func (t *topology) queueDelete(m *wire.QueueDelete) error {
	ch := t.ch
	name, err := t.queueName(m.Queue)
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

// declareReplyTo answers queue.declare, passive or not, for direct
// reply-to names as RabbitMQ 4.3 does: the pseudo-queue itself always
// exists, and a rewritten name exists while its reply consumer lives
// (0 messages, 1 consumer; 404 once gone), which is how a responder can
// check that the requester is still there.
func (t *topology) declareReplyTo(m *wire.QueueDeclare) (bool, error) {
	ch := t.ch
	switch {
	case m.Queue == replyToQueue:
	case isReplyName(m.Queue):
		if !ch.c.s.replyLives(m.Queue) {
			return true, wire.Errorf(wire.NotFound, "no queue '%s' in vhost '%s'", m.Queue, ch.c.vhost.Name())
		}
	default:
		return false, nil
	}
	if !m.NoWait {
		ch.reply(&wire.QueueDeclareOk{Queue: m.Queue, ConsumerCount: 1})
	}
	return true, nil
}

// queueName resolves the empty name to the channel's last declared queue.
func (t *topology) queueName(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if t.lastQueue == "" {
		return "", wire.Errorf(wire.NotFound, "no previously declared queue")
	}
	return t.lastQueue, nil
}
