// Package clients holds tests that run RabbitMQ's own client libraries,
// not amqp091-go, against a Warren cluster: pika and kombu (Celery's
// messaging layer, over py-amqp) in Python and the RabbitMQ Java client,
// each as a small application in testdata/
// that checks what such applications rely on. They are what an
// application moved from RabbitMQ to Warren runs, so they catch what one
// Go client's leniency or habits would hide: other table encodings,
// other orders of frames, other reactions to a server's close.
//
// The clients come from Debian's packages (python3-pika, python3-kombu,
// librabbitmq-client-java, a JDK). Without them the tests skip, unless
// WARREN_CLIENT_TESTS=require (as .ci/run sets after installing them).
package clients
