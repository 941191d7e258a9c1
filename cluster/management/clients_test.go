package management_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func testClients(t *testing.T, n []*apiNode) {
	// A client on node 1 consuming from a queue; the API of node 0 sees it.
	expect(t, n[0].guest(t, "PUT", "/api/queues/%2F/work", map[string]any{"arguments": map[string]any{"x-queue-type": "quorum"}}), http.StatusCreated, "declare")
	seen(t, n[1], "/api/queues/%2F/work")
	conn, err := amqp091.DialConfig("amqp://guest:guest@"+n[1].AMQPAddr().String()+"/", amqp091.Config{Properties: amqp091.Table{"connection_name": "worker-7"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("work", "worker-tag", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	var name string
	eventually(t, "the worker's connection listed on node 0", func() bool {
		r := n[0].guest(t, "GET", "/api/connections", nil)
		expect(t, r, http.StatusOK, "connections")
		for _, c := range r.list(t) {
			if c["client_properties"].(map[string]any)["connection_name"] == "worker-7" {
				name = c["name"].(string)
				return c["node"] == n[1].Name() && c["user"] == "guest" && c["channels"] == float64(1)
			}
		}
		return false
	})
	r := n[2].guest(t, "GET", "/api/connections/"+url.PathEscape(name), nil)
	expect(t, r, http.StatusOK, "one connection")
	if r.object(t)["name"] != name {
		t.Fatalf("connection: %s", r.body)
	}
	r = n[2].guest(t, "GET", "/api/channels", nil)
	expect(t, r, http.StatusOK, "channels")
	found := false
	for _, c := range r.list(t) {
		if c["connection_details"].(map[string]any)["name"] == name {
			found = c["prefetch_count"] == float64(5) && c["consumer_count"] == float64(1)
		}
	}
	if !found {
		t.Fatalf("the worker's channel not listed as it is: %s", r.body)
	}
	r = n[0].guest(t, "GET", "/api/consumers/%2F", nil)
	expect(t, r, http.StatusOK, "consumers")
	found = false
	for _, c := range r.list(t) {
		if c["consumer_tag"] == "worker-tag" {
			found = c["queue"].(map[string]any)["name"] == "work" && c["ack_required"] == true
		}
	}
	if !found {
		t.Fatalf("the worker's consumer not listed: %s", r.body)
	}

	// A user who is not an administrator may not close another's.
	expect(t, n[0].guest(t, "PUT", "/api/users/peer", map[string]any{"password": "p", "tags": "monitoring"}), http.StatusCreated, "create peer")
	seen(t, n[2], "/api/users/peer")
	expectError(t, call(t, "DELETE", n[2].url+"/api/connections/"+url.PathEscape(name), "peer", "p", nil), http.StatusUnauthorized, "not_authorised", "monitoring closes a connection")

	req, _ := http.NewRequest("DELETE", n[2].url+"/api/connections/"+url.PathEscape(name), nil)
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("X-Reason", "maintenance window")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("close connection: %d", resp.StatusCode)
	}
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp091.ConnectionForced || !strings.Contains(e.Reason, "maintenance window") {
			t.Fatalf("client closed with %v", e)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the client was not closed")
	}
	expectError(t, n[2].guest(t, "DELETE", "/api/connections/"+url.PathEscape(name), nil), http.StatusNotFound, "Object Not Found", "close again")
	expect(t, n[0].guest(t, "DELETE", "/api/queues/%2F/work", nil), http.StatusNoContent, "delete")
}
