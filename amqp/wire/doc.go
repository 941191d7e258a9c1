// Package wire is the AMQP 0-9-1 wire protocol as RabbitMQ speaks it: frames, method
// arguments, field tables and content headers.
//
// The method structs, constants and content properties in spec_gen.go are generated from
// RabbitMQ's JSON rendering of the spec (with RabbitMQ's extensions: exchange bindings,
// publisher confirms, basic.nack, connection.blocked, connection.update-secret). Each method
// struct's pointer implements Method; DecodeMethod returns pointers, so a type switch reads
//
//	switch m := m.(type) {
//	case *amqp.BasicPublish:
//
// The package reads and writes bytes; what a method means to a connection or a channel is the
// server's business. Decoding never trusts a length it has not checked against the bytes at
// hand, and the frame Reader refuses a frame larger than the negotiated frame max before
// allocating its payload.
//
// Protocol errors are *Error values carrying the reply code RabbitMQ would send.
package wire

//go:generate go run ../internal/specgen -spec ../internal/specgen/spec/amqp-rabbitmq-0.9.1.json -out spec_gen.go
