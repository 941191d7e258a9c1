// Package management serves RabbitMQ's management HTTP API (the one
// rabbitmqadmin, monitoring probes and scripts speak) on a node, so that
// tools written against RabbitMQ work against Warren unchanged.
//
// Every node answers for the whole cluster: reads and operator changes go
// in-process to the node's admin service (cluster/admin), which fans out
// to the other nodes where only they know. What RabbitMQ's API does as a
// client would (declaring, deleting and binding queues and exchanges,
// publishing, getting, purging) is done over an AMQP connection to the
// node's own listener, logged in as the HTTP caller: the broker then
// checks that user's permissions exactly as it does for any client.
//
// Requests are authenticated with HTTP basic auth against the cluster's
// users and allowed by RabbitMQ's user tags (auth.go). docs/management.md
// lists what is served and how it differs from RabbitMQ.
package management
