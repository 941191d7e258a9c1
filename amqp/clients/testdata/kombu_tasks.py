"""A task queue as kombu (Debian's python3-kombu, over py-amqp) runs it:
the messaging layer of Celery.

Publishes JSON tasks through one node into a durable quorum queue with
publisher confirms, consumes them through another with prefetch and
acks, and checks what Celery leans on: confirms surfacing a full queue's
nack as an error, rejected tasks requeued, an auto-delete transient queue
(Celery's event and broadcast queues) fed through the other node, a reply
queue per client (exclusive, locked on every node), and the heartbeat it
asks for. Exits 1 at the first check that
fails.

usage: kombu_tasks.py PUBLISH_URL CONSUME_URL PREFIX
"""

import socket
import sys
import time

from kombu import Connection, Consumer, Exchange, Producer, Queue
from amqp.exceptions import MessageNacked


def check(ok, what):
    if not ok:
        print("FAIL:", what, flush=True)
        sys.exit(1)
    print("ok:", what, flush=True)


def drain(conn, until, timeout=20):
    deadline = time.time() + timeout
    while not until() and time.time() < deadline:
        try:
            conn.drain_events(timeout=0.2)
        except socket.timeout:
            pass


def main():
    pub_url, con_url, prefix = sys.argv[1:4]
    opts = {"confirm_publish": True}
    exchange = Exchange(prefix + ".tasks", type="direct", durable=True)
    tasks = Queue(prefix + ".tasks", exchange, routing_key="task", durable=True,
                  queue_arguments={"x-queue-type": "quorum"})

    with Connection(pub_url, transport_options=opts, heartbeat=10) as pub, \
            Connection(con_url, heartbeat=10) as con:
        producer = Producer(pub.channel(), exchange=exchange, routing_key="task")
        count = 100
        for i in range(count):
            producer.publish({"task": "add", "args": [i, i], "id": i}, serializer="json",
                             declare=[tasks], delivery_mode=2,
                             headers={"lang": "py", "retries": 0})
        check(True, "%d tasks published with confirms" % count)

        got, rejected = [], []

        def on_task(body, message):
            if body["id"] == 7 and not message.delivery_info.get("redelivered"):
                rejected.append(body["id"])
                message.reject(requeue=True)
                return
            got.append(body["id"])
            message.ack()

        consumer = Consumer(con.channel(), queues=[tasks], callbacks=[on_task], accept=["json"])
        consumer.qos(prefetch_count=10)
        with consumer:
            drain(con, lambda: len(got) == count)
        check(sorted(got) == list(range(count)), "every task consumed once through the other node (%d)" % len(got))
        # The task is taken only when flagged redelivered: one rejection
        # and the count above mean the requeued copy came back so flagged.
        check(rejected == [7], "the rejected task came back once, redelivered")
        con.heartbeat_check()
        check(con.connection.heartbeat == 10, "heartbeat of 10 s negotiated (%s)" % con.connection.heartbeat)

        # A full queue: with confirms, the nack of the publish that does not
        # fit raises, as Celery's apply_async would.
        full = Queue(prefix + ".full", exchange, routing_key="full", durable=True,
                     queue_arguments={"x-queue-type": "quorum", "x-max-length": 1,
                                      "x-overflow": "reject-publish"})
        producer.publish({"id": "fits"}, routing_key="full", declare=[full], serializer="json")
        try:
            producer.publish({"id": "overflows"}, routing_key="full", serializer="json")
            check(False, "a publish to a full reject-publish queue is nacked")
        except MessageNacked:
            check(True, "a publish to a full reject-publish queue raised MessageNacked")

        # Celery's event queues: transient and auto-deleted with their
        # last consumer, fed through another node than their consumer's;
        # and a reply queue only its connection may use, on any node.
        events_x = Exchange(prefix + ".events", type="topic", durable=False)
        events = Queue(prefix + ".events", events_x, routing_key="#", durable=False, auto_delete=True)
        seen = []
        ev_consumer = Consumer(con.channel(), queues=[events],
                               callbacks=[lambda b, m: (seen.append(b), m.ack())], accept=["json"])
        with ev_consumer:
            Producer(pub.channel()).publish({"type": "worker-online"}, exchange=events_x,
                                            routing_key="worker.online", serializer="json",
                                            declare=[events_x])
            drain(con, lambda: len(seen) == 1)
        check(seen == [{"type": "worker-online"}], "an event through a transient topic exchange, from another node")
        time.sleep(0.5)
        try:
            pub.channel().queue_declare(prefix + ".events", passive=True)
            check(False, "the auto-delete queue went with its consumer")
        except Exception as e:
            check("404" in str(e) or "NOT_FOUND" in str(e), "the auto-delete queue went with its consumer (%s)" % e)

        reply = Queue(prefix + ".reply", exclusive=True, auto_delete=True, durable=False)
        reply.bind(con.channel()).declare()
        with Connection(pub_url) as other:
            try:
                other.channel().queue_declare(prefix + ".reply", passive=True)
                check(False, "another connection may not use the exclusive reply queue")
            except Exception as e:
                check("405" in str(e) or "RESOURCE_LOCKED" in str(e), "another connection is refused the exclusive queue (%s)" % e)

        ch = pub.channel()
        ch.queue_delete(tasks.name)
        ch.queue_delete(full.name)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
