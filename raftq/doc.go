// Package raftq is the quorum queue's state machine: a deterministic
// function (state, command) → (state, effects) that every member of a
// queue's Raft group applies to the same log. It knows nothing of Raft,
// the network or the clock; the code around it (the FSM adapter, the queue
// runtime) proposes commands, applies committed entries with
// Machine.Apply, and carries out the effects on the leader only.
//
// # Determinism
//
// Apply reads only the machine and the command. Time is a field of the
// command (Command.Now, stamped by the leader when it proposes), and the
// machine's clock is the greatest Now seen, so it never runs backwards.
// Maps are only looked up, or folded in ways their order cannot show
// (a minimum, an argmax under a total order); anything ordered iterates
// slices, rings or sorted keys. A broken invariant panics; a command that
// makes no sense (an unknown consumer, a settled ID) changes nothing.
//
// # Messages are referenced, not held
//
// A message's ID is the log index of its enqueue entry. The machine keeps a
// 32-byte record per message (index, expiry, body size, delivery-count,
// acquired-count, priority); the message itself stays in the entry, and
// effects name it by index for the runtime to read back (EffectDeliver,
// EffectGetResult, EffectDeadLetter). AppendLiveIndexes lists the entries
// still needed, so the log store can delete the others below a snapshot.
//
// Every message is in exactly one place until it is gone:
//
//   - ready: in the returns (came back; served first, in the order they
//     came back) or in one of 32 priority levels (never delivered; highest
//     priority first, publish order within a level);
//   - checked out to exactly one consumer or basic.get owner, with a
//     consumer-timeout deadline;
//   - awaiting dead-letter confirmation (x-dead-letter-strategy
//     at-least-once), until DeadLetterSettled.
//
// # Pieces
//
// Machine holds the clock, the config, the machine version and the
// x-expires lease, applies commands (Apply) and answers the runtime's
// queries; each part owns its own state and the rules that keep it
// consistent:
//
//   - ready (ready.go, ring.go): the messages waiting for a consumer, in
//     serving order, with their counts and bytes; expiry takes from its
//     heads (tick.go).
//   - delayed (delayed.go): returned messages waiting out a delayed retry,
//     by the time they become ready; promote moves the due ones to ready.
//   - checkouts (checkouts.go): the checked-out messages, by ID and by
//     delivery number, with each holder's count and delivery order and the
//     consumer-timeout deadlines.
//   - consumers (consumer.go, attach.go, sac.go, deliver.go, settle.go,
//     consumers_list.go): the consumer records, the attached count, the
//     exclusive consumer, the lineup that takes turns among competing
//     consumers, the single active consumer; it carries out the consumer
//     commands, basic.get, settlement, the hand-out of ready messages and
//     the consumer timeout. It keeps a pointer to its machine for the
//     clock, the effects and what happens to a message that comes back.
//   - deadLetters (deadletter.go): the at-least-once dead letters awaiting
//     confirmation, in dead-lettering order. Machine.deadLetter decides
//     where a message goes (drop, at-most-once, at-least-once).
//   - publishers (publish.go): each tracked publisher's next sequence
//     number and recent refusals.
//
// Around them: limits.go (x-max-length, drop-head), tick.go (expiry, the
// consumer timeout, x-expires, NextDeadline), reconfig.go (UpdateConfig),
// version.go (machine versions), snapshot.go and restore.go (the snapshot
// format, one section per part), live.go (which log entries are still
// needed).
//
// # RabbitMQ behaviour
//
// The rules are RabbitMQ 4.3's, read in its quorum queue, priority, TTL,
// dead-lettering and consumer guides and in deps/rabbit/src/rabbit_fifo.erl
// (v4.3.5), which the comments cite where a rule is applied. Config is
// parsed from the queue's arguments with RabbitMQ's names, defaults and
// validation errors; a policy change reaches the machine as an
// UpdateConfig command (reconfig.go follows rabbit_fifo's update_config). Where Warren differs on purpose
// it says so: reject-publish is exact instead of overshooting, a consumer
// timeout cancels the consumer in the machine, an exclusive consumer is
// enforced, and x-expires is also renewed by a redeclaration (Touch), as the
// TTL guide describes.
//
// # What the runtime does
//
//   - Assigns consumer IDs (one per basic.consume, one per channel for
//     basic.get) and publisher IDs with per-queue sequence numbers from 1.
//   - Settles no-ack consumers' deliveries once sent, as RabbitMQ's
//     rabbit_fifo_client does: the machine checks out every delivery, so a
//     no-ack consumer's credit is replenished by those settles.
//   - Proposes a Tick when NextDeadline is due, a Touch on redeclaration.
//   - On becoming leader, carries out AppendPendingDeadLetters and, if
//     DeleteRequested, the queue's deletion.
//   - Builds x-death headers with RecordDeath.
//
// Commands are encoded as an opcode byte plus varint fields (see
// Command.Append and Decode); opcodes are only ever appended. Snapshots
// (AppendSnapshot, Restore) are versioned, deterministic and proportional
// to the number of messages, never to their bodies.
package raftq
