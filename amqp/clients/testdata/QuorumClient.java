// A quorum-queue application as the RabbitMQ Java client (Debian's
// librabbitmq-client-java, 5.0) runs it, as one source file for `java`.
//
// Publishes through one node and consumes through another, and checks
// what Java applications rely on: confirms (waitForConfirmsOrDie, and a
// nack from a full queue with x-overflow reject-publish), a single active
// consumer that hands over when cancelled, prefetch, returns of unroutable
// mandatory publishes, channel-level refusals with their reply codes,
// the consumer cancel notification, RpcClient over direct reply-to across
// nodes; then, if a third URI is given, the
// client's automatic recovery: a consumer connects to either of the second
// and third URIs' nodes (the client shuffles its addresses), the program
// prints RECOVER and the port it is connected to and waits for a line on
// stdin while the test stops that node, and the client must reconnect to
// the other, redeclare and resume its consumer, and receive what is
// published meanwhile. Exits 1 at the first check that fails.
//
// usage: java -cp amqp-client.jar:slf4j-api.jar QuorumClient.java PUBLISH_URI CONSUME_URI PREFIX [FALLBACK_URI]

import com.rabbitmq.client.*;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

public class QuorumClient {
    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAIL: " + what);
            System.out.flush();
            System.exit(1);
        }
        System.out.println("ok: " + what);
        System.out.flush();
    }

    static Connection connect(String uri, String name) throws Exception {
        ConnectionFactory f = new ConnectionFactory();
        f.setUri(uri);
        f.setAutomaticRecoveryEnabled(false);
        return f.newConnection(name);
    }

    static Map<String, Object> quorum(Object... kv) {
        Map<String, Object> args = new HashMap<>();
        args.put("x-queue-type", "quorum");
        for (int i = 0; i < kv.length; i += 2) {
            args.put((String) kv[i], kv[i + 1]);
        }
        return args;
    }

    // A consumer that acks what it receives and records the bodies.
    static class Recorder extends DefaultConsumer {
        final List<String> bodies = Collections.synchronizedList(new ArrayList<>());
        final AtomicReference<String> cancelled = new AtomicReference<>();

        Recorder(Channel ch) {
            super(ch);
        }

        @Override
        public void handleDelivery(String tag, Envelope env, AMQP.BasicProperties props, byte[] body) throws java.io.IOException {
            bodies.add(new String(body, StandardCharsets.UTF_8));
            getChannel().basicAck(env.getDeliveryTag(), false);
        }

        @Override
        public void handleCancel(String tag) {
            cancelled.set(tag);
        }
    }

    static boolean waitFor(long millis, java.util.function.BooleanSupplier cond) throws InterruptedException {
        long deadline = System.currentTimeMillis() + millis;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                return false;
            }
            Thread.sleep(20);
        }
        return true;
    }

    public static void main(String[] argv) throws Exception {
        String pubUri = argv[0], conUri = argv[1], prefix = argv[2];
        Connection pubConn = connect(pubUri, "java publisher");
        Connection conConn = connect(conUri, "java consumer");
        check(pubConn.isOpen() && conConn.isOpen(), "connected to both nodes");
        Map<String, Object> server = pubConn.getServerProperties();
        check(server.containsKey("capabilities"), "server properties carry capabilities");

        Channel pub = pubConn.createChannel();
        pub.confirmSelect();

        // Single active consumer: of two consumers, one gets everything
        // until it is cancelled, then the other takes over.
        String sac = prefix + ".sac";
        pub.queueDeclare(sac, true, false, false, quorum("x-single-active-consumer", true));
        Channel con = conConn.createChannel();
        con.basicQos(5);
        Recorder first = new Recorder(con), second = new Recorder(con);
        String firstTag = con.basicConsume(sac, false, first);
        con.basicConsume(sac, false, second);
        for (int i = 0; i < 20; i++) {
            pub.basicPublish("", sac, MessageProperties.PERSISTENT_TEXT_PLAIN, ("m" + i).getBytes(StandardCharsets.UTF_8));
        }
        pub.waitForConfirmsOrDie(10_000);
        check(true, "20 publishes confirmed (waitForConfirmsOrDie)");
        check(waitFor(10_000, () -> first.bodies.size() == 20), "the active consumer got all 20 (" + first.bodies.size() + ")");
        check(second.bodies.isEmpty(), "the waiting consumer got none");
        List<String> want = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            want.add("m" + i);
        }
        check(first.bodies.equals(want), "in publish order");
        con.basicCancel(firstTag);
        for (int i = 20; i < 25; i++) {
            pub.basicPublish("", sac, MessageProperties.PERSISTENT_TEXT_PLAIN, ("m" + i).getBytes(StandardCharsets.UTF_8));
        }
        pub.waitForConfirmsOrDie(10_000);
        check(waitFor(10_000, () -> second.bodies.size() == 5), "after the cancel, the other consumer became active (" + second.bodies.size() + " of 5)");
        check(first.bodies.size() == 20, "the cancelled consumer got nothing more");

        // A full queue with reject-publish nacks the publish that does not fit.
        String full = prefix + ".full";
        pub.queueDeclare(full, true, false, false, quorum("x-max-length", 2, "x-overflow", "reject-publish"));
        SortedSet<Long> acked = new ConcurrentSkipListSet<>(), nacked = new ConcurrentSkipListSet<>();
        pub.addConfirmListener(new ConfirmListener() {
            public void handleAck(long tag, boolean multiple) {
                acked.add(tag);
            }

            public void handleNack(long tag, boolean multiple) {
                nacked.add(tag);
            }
        });
        long before = pub.getNextPublishSeqNo();
        for (int i = 0; i < 3; i++) {
            pub.basicPublish("", full, MessageProperties.PERSISTENT_TEXT_PLAIN, ("f" + i).getBytes(StandardCharsets.UTF_8));
        }
        check(!pub.waitForConfirms(10_000), "waitForConfirms is false when the queue is full");
        check(nacked.contains(before + 2) && !nacked.contains(before) && !nacked.contains(before + 1),
                "the third publish to a queue of max length 2 was nacked (nacked " + nacked + ", first " + before + ")");
        check(pub.messageCount(full) == 2, "the full queue holds 2");

        // An unroutable mandatory publish comes back.
        CompletableFuture<Integer> returned = new CompletableFuture<>();
        pub.addReturnListener((code, text, exchange, key, props, body) -> returned.complete(code));
        pub.basicPublish("", prefix + ".nowhere", true, MessageProperties.PERSISTENT_TEXT_PLAIN, "x".getBytes());
        check(returned.get(10, TimeUnit.SECONDS) == 312, "an unroutable mandatory publish was returned with 312");
        pub.waitForConfirmsOrDie(10_000);

        // Refusals close the channel with the reply code, not the connection.
        Channel bad = pubConn.createChannel();
        try {
            bad.queueDeclare(sac, true, false, false, Map.of("x-queue-type", "classic"));
            check(false, "redeclaring with another queue type is refused");
        } catch (java.io.IOException e) {
            ShutdownSignalException s = (ShutdownSignalException) e.getCause();
            AMQP.Channel.Close close = (AMQP.Channel.Close) s.getReason();
            check(!s.isHardError() && close.getReplyCode() == 406, "redeclaring with another type: " + close.getReplyText());
        }
        bad = pubConn.createChannel();
        try {
            bad.exchangeDeclarePassive(prefix + ".missing");
            check(false, "a passive declare of a missing exchange is refused");
        } catch (java.io.IOException e) {
            AMQP.Channel.Close close = (AMQP.Channel.Close) ((ShutdownSignalException) e.getCause()).getReason();
            check(close.getReplyCode() == 404, "a passive declare of a missing exchange: " + close.getReplyText());
        }
        check(pubConn.isOpen(), "the connection stays open after channel errors");

        // Deleting a queue under its consumer cancels it.
        AMQP.Queue.DeleteOk del = pub.queueDelete(sac);
        check(waitFor(10_000, () -> second.cancelled.get() != null), "the consumer was cancelled when its queue was deleted");
        pub.queueDelete(full);

        // RPC by direct reply-to (RpcClient), the server on the publishing
        // node, the client on the consuming one.
        String rpcQueue = prefix + ".rpc";
        Channel serverCh = pubConn.createChannel();
        serverCh.queueDeclare(rpcQueue, true, false, false, quorum());
        StringRpcServer rpcServer = new StringRpcServer(serverCh, rpcQueue) {
            @Override
            public String handleStringCall(String request) {
                return request + "/pong";
            }
        };
        Thread serving = new Thread(() -> {
            try {
                rpcServer.mainloop();
            } catch (Exception e) {
                // terminated below
            }
        });
        serving.setDaemon(true);
        serving.start();
        RpcClient rpc = new RpcClient(conConn.createChannel(), "", rpcQueue, "amq.rabbitmq.reply-to", 10_000);
        check(rpc.stringCall("ping").equals("ping/pong"), "RpcClient over direct reply-to, client and server on different nodes");
        check(rpc.stringCall("again").equals("again/pong"), "and a second call");
        rpc.close();
        rpcServer.terminateMainloop();
        pub.queueDelete(rpcQueue);
        conConn.close();

        if (argv.length > 3) {
            recovery(pubConn, conUri, argv[3], prefix);
        }
        pubConn.close();
        System.out.println("PASS");
        System.out.flush();
        System.exit(0);
    }

    // recovery checks the client's automatic recovery across the loss of
    // the node it consumes through.
    static void recovery(Connection pubConn, String conUri, String fallbackUri, String prefix) throws Exception {
        ConnectionFactory f = new ConnectionFactory();
        f.setUri(conUri);
        f.setAutomaticRecoveryEnabled(true);
        f.setTopologyRecoveryEnabled(true);
        f.setNetworkRecoveryInterval(200);
        URI a = new URI(conUri), b = new URI(fallbackUri);
        List<Address> addrs = List.of(new Address(a.getHost(), a.getPort()), new Address(b.getHost(), b.getPort()));
        // As an application lists a cluster's nodes; the client shuffles
        // them, so either may be the one it connects to.
        Connection conn = f.newConnection(addrs, "java recovering consumer");
        // Beside it, a connection without recovery, to see how it is closed.
        int port = conn.getPort();
        Connection plain = connect(port == a.getPort() ? conUri : fallbackUri, "java plain");
        CompletableFuture<ShutdownSignalException> plainClosed = new CompletableFuture<>();
        plain.addShutdownListener(plainClosed::complete);
        CountDownLatch recovered = new CountDownLatch(1);
        ((Recoverable) conn).addRecoveryListener(new RecoveryListener() {
            public void handleRecovery(Recoverable r) {
                recovered.countDown();
            }

            public void handleRecoveryStarted(Recoverable r) {
            }
        });
        String q = prefix + ".recover";
        Channel ch = conn.createChannel();
        ch.queueDeclare(q, true, false, false, quorum());
        Set<String> got = ConcurrentHashMap.newKeySet();
        ch.basicConsume(q, false, new DefaultConsumer(ch) {
            @Override
            public void handleDelivery(String tag, Envelope env, AMQP.BasicProperties props, byte[] body) throws java.io.IOException {
                got.add(new String(body, StandardCharsets.UTF_8));
                getChannel().basicAck(env.getDeliveryTag(), false);
            }
        });
        Channel pub = pubConn.createChannel();
        pub.confirmSelect();
        for (int i = 0; i < 10; i++) {
            pub.basicPublish("", q, MessageProperties.PERSISTENT_TEXT_PLAIN, ("before" + i).getBytes(StandardCharsets.UTF_8));
        }
        pub.waitForConfirmsOrDie(10_000);
        check(waitFor(10_000, () -> got.size() == 10), "10 received before the node goes");

        System.out.println("RECOVER " + port);
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine(); // the node is gone

        for (int i = 0; i < 10; i++) {
            pub.basicPublish("", q, MessageProperties.PERSISTENT_TEXT_PLAIN, ("after" + i).getBytes(StandardCharsets.UTF_8));
        }
        pub.waitForConfirmsOrDie(30_000);
        check(true, "10 more confirmed while the consumer's node is down");
        ShutdownSignalException why = plainClosed.get(10, TimeUnit.SECONDS);
        check(why.isHardError() && !why.isInitiatedByApplication() && ((AMQP.Connection.Close) why.getReason()).getReplyCode() == 320,
                "the stopping node closed its connections with 320: " + ((AMQP.Connection.Close) why.getReason()).getReplyText());
        check(recovered.await(30, TimeUnit.SECONDS), "the consumer's connection recovered");
        check(conn.isOpen() && conn.getPort() != port && (conn.getPort() == a.getPort() || conn.getPort() == b.getPort()),
                "reconnected to the other node (port " + port + ", then " + conn.getPort() + ")");
        check(waitFor(30_000, () -> got.size() == 20), "the recovered consumer received all 20 (" + got.size() + ")");
        pub.queueDelete(q);
        conn.close();
    }
}
