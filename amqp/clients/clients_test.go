package clients_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/cluster/pki"
)

// need skips the test when a client is missing, or fails it when the run
// requires every client (WARREN_CLIENT_TESTS=require).
func need(t *testing.T, ok bool, what, install string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("WARREN_CLIENT_TESTS") == "require" {
		t.Fatalf("%s is missing (apt-get install %s)", what, install)
	}
	t.Skipf("%s is missing (apt-get install %s; WARREN_CLIENT_TESTS=require fails instead)", what, install)
}

func uri(m *nodetest.Member) string {
	return fmt.Sprintf("amqp://guest:guest@%s/%%2F", m.AMQPAddr())
}

// pythonWith is a Python that imports module: Debian's, which python3-*
// packages install into, before whatever python3 is first on the PATH.
func pythonWith(module string) string {
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import "+module).Run() == nil {
			return py
		}
	}
	return ""
}

// runPython runs a testdata script with a publishing and a consuming
// node's URI and a name prefix; it must end by printing PASS.
func runPython(t *testing.T, py, script, pubURI, conURI, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/"+script, pubURI, conURI, prefix).CombinedOutput()
	t.Logf("%s:\n%s", script, out)
	if err != nil || !bytes.HasSuffix(bytes.TrimSpace(out), []byte("PASS")) {
		t.Fatalf("%s: %v", script, err)
	}
}

// TestPika runs testdata/pika_quorum.py on a 3-node cluster, publishing
// through one node and consuming through another.
func TestPika(t *testing.T) {
	py := pythonWith("pika")
	need(t, py != "", "Python with pika", "python3-pika")
	ms := nodetest.StartCluster(t, 3)
	runPython(t, py, "pika_quorum.py", uri(ms[0]), uri(ms[1]), "pika")
}

// TestKombu runs testdata/kombu_tasks.py, Celery's messaging layer over
// py-amqp, on a 3-node cluster, publishing through one node and consuming
// through another.
func TestKombu(t *testing.T) {
	py := pythonWith("kombu")
	need(t, py != "", "Python with kombu", "python3-kombu")
	ms := nodetest.StartCluster(t, 3)
	runPython(t, py, "kombu_tasks.py", uri(ms[2]), uri(ms[0]), "kombu")
}

// The Java client and its logging facade, as Debian installs them.
var javaClasspath = []string{"/usr/share/java/amqp-client.jar", "/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-nop.jar"}

func haveJava() bool {
	if _, err := exec.LookPath("java"); err != nil {
		return false
	}
	for _, jar := range javaClasspath {
		if _, err := os.Stat(jar); err != nil {
			return false
		}
	}
	return true
}

// TestJavaClient runs testdata/QuorumClient.java on a 3-node cluster:
// publishing through warren-0, consuming through warren-1; then a consumer
// that lists warren-1 and warren-2 connects to one, and the test stops that
// node (a graceful shutdown, as in a rolling restart) when the program
// asks, so that the client's automatic recovery moves the consumer to the
// other while publishing goes on.
func TestJavaClient(t *testing.T) {
	need(t, haveJava(), "Java with the RabbitMQ client", "default-jdk-headless librabbitmq-client-java")
	ms := nodetest.StartCluster(t, 3)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-cp", strings.Join(javaClasspath, ":"),
		"testdata/QuorumClient.java", uri(ms[0]), uri(ms[1]), "java", uri(ms[2]))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	lines := bufio.NewScanner(stdout)
	stopped := false
	for lines.Scan() {
		line := lines.Text()
		out.WriteString(line + "\n")
		if port, ok := strings.CutPrefix(line, "RECOVER "); ok && !stopped {
			for _, m := range ms[1:] {
				if strings.HasSuffix(m.AMQPAddr().String(), ":"+port) {
					m.Stop()
					stopped = true
				}
			}
			if !stopped {
				t.Errorf("the consumer is connected to port %s, not warren-1's or warren-2's", port)
			}
			if _, err := io.WriteString(stdin, "go\n"); err != nil {
				t.Errorf("tell the client the node stopped: %v", err)
			}
		}
	}
	err = cmd.Wait()
	t.Logf("QuorumClient.java:\n%s%s", out.String(), stderr.String())
	if err != nil || !strings.HasSuffix(strings.TrimSpace(out.String()), "PASS") {
		t.Fatalf("QuorumClient.java: %v", err)
	}
	if !stopped {
		t.Fatal("the program never reached its recovery part")
	}
}

// tlsCluster starts a 3-node cluster with mutual TLS between its nodes
// and AMQPS on each, and issues a client certificate for guest from its
// CA and another from a stranger CA.
type tlsCluster struct {
	ms           []*nodetest.Member
	ca           string
	guest, other pki.Files
}

func startTLSCluster(t *testing.T) tlsCluster {
	ca := nodetest.NewCA(t)
	ms := nodetest.StartCluster(t, 3, nodetest.TLS(t, ca, []byte("0123456789abcdef0123456789abcdef")))
	_, guest := nodetest.Issue(t, ca, pki.Request{Kind: pki.Client, Name: "guest"})
	_, other := nodetest.Issue(t, nodetest.NewCA(t), pki.Request{Kind: pki.Client, Name: "guest"})
	return tlsCluster{ms: ms, ca: filepath.Join(ca, pki.CACertFile), guest: guest, other: other}
}

// TestPikaTLS runs testdata/pika_tls.py: pika with ssl against a cluster
// with mutual TLS, EXTERNAL through one node, a password through another.
func TestPikaTLS(t *testing.T) {
	py := pythonWith("pika")
	need(t, py != "", "Python with pika", "python3-pika")
	c := startTLSCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/pika_tls.py", c.ca, c.guest.Cert, c.guest.Key,
		c.ms[0].AMQPSAddr().String(), c.ms[1].AMQPSAddr().String(), c.other.CA, c.other.Cert, c.other.Key).CombinedOutput()
	t.Logf("pika_tls.py:\n%s", out)
	if err != nil || !bytes.HasSuffix(bytes.TrimSpace(out), []byte("PASS")) {
		t.Fatalf("pika_tls.py: %v", err)
	}
}

// TestJavaTLS runs testdata/TlsClient.java: the RabbitMQ Java client over
// AMQPS against a cluster with mutual TLS, EXTERNAL through one node, a
// password through another.
func TestJavaTLS(t *testing.T) {
	need(t, haveJava(), "Java with the RabbitMQ client", "default-jdk-headless librabbitmq-client-java")
	c := startTLSCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "java", "-cp", strings.Join(javaClasspath, ":"), "testdata/TlsClient.java",
		c.ca, c.guest.Cert, c.guest.Key, c.ms[0].AMQPSAddr().String(), c.ms[1].AMQPSAddr().String()).CombinedOutput()
	t.Logf("TlsClient.java:\n%s", out)
	if err != nil || !bytes.HasSuffix(bytes.TrimSpace(out), []byte("PASS")) {
		t.Fatalf("TlsClient.java: %v", err)
	}
}
