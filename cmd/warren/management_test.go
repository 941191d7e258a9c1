package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestManagementAPIOverHTTPS: a node with TLS material serves the
// management API over HTTPS with its own certificate, so that a client
// trusting the cluster CA reaches it and a plaintext one does not.
func TestManagementAPIOverHTTPS(t *testing.T) {
	p := newTestPKI(t)
	mgmt := freeAddr(t)
	startTLSServer(t, p, "WARREN_MANAGEMENT_ADDR="+mgmt)
	waitListening(t, mgmt)

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: p.clientTLS(t, nil)}}
	req, _ := http.NewRequest("GET", "https://"+mgmt+"/api/whoami", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var who struct{ Name string }
	if err := json.NewDecoder(resp.Body).Decode(&who); err != nil || resp.StatusCode != http.StatusOK || who.Name != "guest" {
		t.Fatalf("whoami over HTTPS: %s %v %+v", resp.Status, err, who)
	}

	// RabbitMQ's rabbitmqadmin over HTTPS, trusting the cluster CA.
	if _, err := os.Stat("/usr/bin/rabbitmqadmin"); err == nil {
		_, port, _ := net.SplitHostPort(mgmt)
		out, err := exec.Command("/usr/bin/rabbitmqadmin", "--ssl", "--ssl-ca-cert-file", p.node.CA,
			"-H", "localhost", "-P", port, "-u", "guest", "-p", "guest", "list", "users").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "guest") {
			t.Fatalf("rabbitmqadmin over HTTPS: %v\n%s", err, out)
		}
	}

	plain, err := http.Get("http://" + mgmt + "/api/whoami")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode < 400 {
			t.Fatalf("plain HTTP answered %s on the HTTPS port", plain.Status)
		}
	}
}

// TestManagementAPIOnAStandaloneNode: a node that is not a cluster
// member answers for itself, over plain HTTP without TLS material.
func TestManagementAPIOnAStandaloneNode(t *testing.T) {
	mgmt := freeAddr(t)
	startServer(t, t.TempDir(), freeAddr(t), "WARREN_MANAGEMENT_ADDR="+mgmt)
	waitListening(t, mgmt)
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+mgmt+path, strings.NewReader(body))
		req.SetBasicAuth("guest", "guest")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		_, _ = io.Copy(&sb, resp.Body)
		return resp.StatusCode, sb.String()
	}
	if code, body := do("GET", "/api/nodes", ""); code != http.StatusOK || !strings.Contains(body, `"running":true`) {
		t.Fatalf("nodes: %d %s", code, body)
	}
	if code, body := do("PUT", "/api/queues/%2F/solo", `{"durable":true}`); code != http.StatusCreated {
		t.Fatalf("declare: %d %s", code, body)
	}
	if code, body := do("GET", "/api/queues/%2F/solo", ""); code != http.StatusOK || !strings.Contains(body, `"name":"solo"`) {
		t.Fatalf("queue: %d %s", code, body)
	}
	if code, body := do("GET", "/api/overview", ""); code != http.StatusOK || !strings.Contains(body, `"queues":1`) {
		t.Fatalf("overview: %d %s", code, body)
	}
}
