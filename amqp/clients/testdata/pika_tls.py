"""A pika application over AMQPS against a cluster with mutual TLS between its nodes.

Publishes with confirms through one node, logged in with EXTERNAL as the
user its client certificate names, and consumes through another node with a
password over TLS; then checks that a client trusting another CA refuses the
node, and that a certificate from another CA is refused by it. Exits 1 at the
first check that fails.

usage: pika_tls.py CA_PEM CERT_PEM KEY_PEM PUBLISH_HOST:PORT CONSUME_HOST:PORT OTHER_CA_PEM OTHER_CERT OTHER_KEY
"""

import ssl
import sys

import pika
import pika.exceptions


def check(ok, what):
    if not ok:
        print("FAIL:", what, flush=True)
        sys.exit(1)
    print("ok:", what, flush=True)


def params(addr, ca, cert=None, key=None, creds=None):
    host, port = addr.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert:
        ctx.load_cert_chain(cert, key)
    return pika.ConnectionParameters(host="localhost", port=int(port),
                                     ssl_options=pika.SSLOptions(ctx, "localhost"),
                                     credentials=creds or pika.credentials.ExternalCredentials(),
                                     connection_attempts=3, retry_delay=1)


def main():
    ca, cert, key, pub_addr, con_addr, other_ca, other_cert, other_key = sys.argv[1:9]

    pub = pika.BlockingConnection(params(pub_addr, ca, cert, key))
    ch = pub.channel()
    ch.queue_declare("pika-tls", durable=True, arguments={"x-queue-type": "quorum"})
    ch.confirm_delivery()
    for i in range(100):
        ch.basic_publish("", "pika-tls", str(i).encode(), mandatory=True)
    check(True, "100 publishes confirmed over AMQPS, logged in with EXTERNAL")

    con = pika.BlockingConnection(params(con_addr, ca, creds=pika.PlainCredentials("guest", "guest")))
    cch = con.channel()
    got = []
    for method, _, body in cch.consume("pika-tls", inactivity_timeout=15):
        if method is None:
            break
        got.append(int(body))
        cch.basic_ack(method.delivery_tag)
        if len(got) == 100:
            break
    check(got == list(range(100)), "the 100 messages consumed in order through another node")
    con.close()
    pub.close()

    try:
        pika.BlockingConnection(params(pub_addr, other_ca, creds=pika.PlainCredentials("guest", "guest")))
        check(False, "a client trusting another CA connected")
    except (pika.exceptions.AMQPConnectionError, OSError):
        check(True, "a client trusting another CA refuses the node")

    try:
        pika.BlockingConnection(params(pub_addr, ca, other_cert, other_key))
        check(False, "a certificate from another CA logged in")
    except (pika.exceptions.AMQPConnectionError, OSError):
        check(True, "a certificate from another CA is refused")
    print("PASS", flush=True)


main()
