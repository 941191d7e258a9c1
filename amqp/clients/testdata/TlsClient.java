// TlsClient: the RabbitMQ Java client over AMQPS against a cluster with mutual TLS between its
// nodes. Publishes with confirms through one node, logged in with EXTERNAL as the user its client
// certificate names, and consumes through another with a password over TLS. Prints PASS at the end.
//
// usage: java TlsClient.java CA_PEM CERT_PEM KEY_PEM PUBLISH_HOST:PORT CONSUME_HOST:PORT
import com.rabbitmq.client.*;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

public class TlsClient {
    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAIL: " + what);
            System.exit(1);
        }
        System.out.println("ok: " + what);
    }

    static Certificate cert(String path) throws Exception {
        return CertificateFactory.getInstance("X.509").generateCertificate(new ByteArrayInputStream(Files.readAllBytes(Path.of(path))));
    }

    static PrivateKey key(String path) throws Exception {
        String pem = Files.readString(Path.of(path), StandardCharsets.US_ASCII)
                .replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
        return KeyFactory.getInstance("EC").generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(pem)));
    }

    static SSLContext tls(String ca, String certPath, String keyPath) throws Exception {
        KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
        trust.load(null, null);
        trust.setCertificateEntry("ca", cert(ca));
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trust);
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        KeyStore keys = KeyStore.getInstance(KeyStore.getDefaultType());
        keys.load(null, null);
        if (certPath != null) {
            keys.setKeyEntry("client", key(keyPath), new char[0], new Certificate[]{cert(certPath)});
        }
        kmf.init(keys, new char[0]);
        SSLContext ctx = SSLContext.getInstance("TLSv1.3");
        ctx.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
        return ctx;
    }

    static ConnectionFactory factory(String addr, SSLContext ctx) {
        ConnectionFactory f = new ConnectionFactory();
        f.setHost("localhost");
        f.setPort(Integer.parseInt(addr.substring(addr.lastIndexOf(':') + 1)));
        f.useSslProtocol(ctx);
        return f;
    }

    public static void main(String[] args) throws Exception {
        String ca = args[0], cert = args[1], key = args[2], pubAddr = args[3], conAddr = args[4];

        ConnectionFactory pf = factory(pubAddr, tls(ca, cert, key));
        pf.setSaslConfig(DefaultSaslConfig.EXTERNAL);
        try (Connection pub = pf.newConnection("java-tls-publisher")) {
            Channel ch = pub.createChannel();
            ch.queueDeclare("java-tls", true, false, false, java.util.Map.of("x-queue-type", "quorum"));
            ch.confirmSelect();
            for (int i = 0; i < 100; i++) {
                ch.basicPublish("", "java-tls", true, MessageProperties.PERSISTENT_BASIC, Integer.toString(i).getBytes(StandardCharsets.UTF_8));
            }
            ch.waitForConfirmsOrDie(30_000);
            check(true, "100 publishes confirmed over AMQPS, logged in with EXTERNAL");
        }

        ConnectionFactory cf = factory(conAddr, tls(ca, null, null));
        cf.setUsername("guest");
        cf.setPassword("guest");
        try (Connection con = cf.newConnection("java-tls-consumer")) {
            Channel ch = con.createChannel();
            BlockingQueue<Integer> got = new ArrayBlockingQueue<>(100);
            ch.basicQos(50);
            ch.basicConsume("java-tls", false, (tag, d) -> {
                got.add(Integer.parseInt(new String(d.getBody(), StandardCharsets.UTF_8)));
                ch.basicAck(d.getEnvelope().getDeliveryTag(), false);
            }, tag -> {});
            for (int i = 0; i < 100; i++) {
                Integer n = got.poll(30, TimeUnit.SECONDS);
                if (n == null || n != i) {
                    check(false, "message " + i + " consumed in order through another node (got " + n + ")");
                }
            }
            check(true, "the 100 messages consumed in order through another node");
        }
        System.out.println("PASS");
    }
}
