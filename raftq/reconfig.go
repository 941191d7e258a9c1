package raftq

// updateConfig makes next the queue's configuration: a policy changed the
// queue's effective arguments. It follows what RabbitMQ 4.3's rabbit_fifo
// does with #update_config{} (rabbit_fifo.erl apply_/3 and update_config/2
// and /4; the config comes from rabbit_quorum_queue:ra_machine_config/1 on
// policy_changed/1), then Apply ends as after every command (checkout/4):
//
//   - x-max-length, x-max-length-bytes: enforced at once. With drop-head,
//     a queue now over its limit dead-letters (reason maxlen) or drops its
//     oldest ready messages in this command, not at the next enqueue
//     (checkout/4 → evaluate_limit/4 → drop_head/2; rabbit_fifo's
//     add_drop_head_effects/2 comments on "when the max_length is changed
//     via a configuration update"). With reject-publish nothing is
//     removed; later publishes are refused while the queue is over.
//   - x-overflow: takes effect at once, as above. (rabbit_fifo also tells
//     blocked enqueuers to go once limits are removed; Warren's
//     reject-publish decides per enqueue in the log and blocks no one.)
//   - x-message-ttl: applies to messages enqueued from now on. rabbit_fifo
//     stamps a message's expiry when it is enqueued (maybe_set_msg_ttl/4)
//     and never re-stamps it, so messages already in the queue keep
//     theirs, whether the TTL was raised, lowered, set or removed.
//   - x-delivery-limit: applies when a message next comes back
//     (return_one/8 reads the current limit). A ready or checked-out
//     message already past a lowered limit stays until then. A negative
//     limit is unlimited, as rabbit_fifo makes it undefined.
//   - x-dead-letter-exchange, -routing-key, -strategy: dead letters from
//     now on follow the new settings. Leaving at-least-once (for
//     at-most-once, or no dead-lettering) deletes the messages still
//     awaiting dead-letter confirmation: rabbit_fifo's switch_from/3
//     resets the dlx state ("Deleted ~b dead-lettered messages") and tears
//     down the worker; here each becomes an EffectDrop, in dead-lettering
//     order, so the runtime stops sending it. Staying at-least-once keeps
//     them (update_config(at_least_once, at_least_once, ...) only has the
//     worker look up the new topology), and entering it starts with none.
//   - x-expires: the lease is not restarted. rabbit_fifo keeps last_active
//     ("Only set last_active from 'created' during init, not during config
//     updates ... to avoid resetting queue TTL"), so the new value counts
//     from the queue's last use; if that is already past, the next Tick
//     (NextDeadline says it is due) asks for the deletion.
//   - x-consumer-timeout: applies to consumers attached (and basic.get
//     owners first seen) from now on. rabbit_fifo keeps each consumer's
//     timeout in its metadata, fixed at checkout (get_consumer_timeout/2);
//     its update_config/2 has no consumer timeout to change.
//   - x-delayed-retry-*: applies to returns from now on; messages
//     already waiting keep their times (rabbit_fifo's update_config/2
//     replaces the setting and leaves the delayed tree alone).
//   - x-single-active-consumer: never changes. It is not a policy key, and
//     ra_machine_config/1 reads it from the declared arguments only; the
//     machine keeps its own value whatever next says.
//   - ClassicPriority and MaxPriority (raftq/classic's classic priorities)
//     never change: every ready message sits at a level they chose.
func (m *Machine) updateConfig(next Config) {
	prev := m.cfg
	next.SingleActiveConsumer = prev.SingleActiveConsumer
	next.ClassicPriority, next.MaxPriority = prev.ClassicPriority, prev.MaxPriority
	if prev.keepsDeadLetters() && !next.keepsDeadLetters() {
		m.dead.each(func(x *deadLetter) {
			m.emit(Effect{
				Kind:          EffectDrop,
				Reason:        x.reason,
				Index:         x.index,
				DeliveryCount: x.delivery,
				AcquiredCount: x.acquired,
				Time:          m.clock,
			})
		})
		m.dead.clear()
	}
	m.cfg = next
}

// keepsDeadLetters says whether the machine keeps (some) dead-lettered
// messages until DeadLetterSettled, as deadLetter decides.
func (c *Config) keepsDeadLetters() bool {
	return c.DeadLettering && c.Strategy == AtLeastOnce
}
