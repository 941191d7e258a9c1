package management_test

import "testing"

func testClients(t *testing.T, nodes []*apiNode)                {}
func testDefinitionsAndPolicies(t *testing.T, nodes []*apiNode) {}
func testHealthChecks(t *testing.T, nodes []*apiNode)           {}
func testReplicas(t *testing.T, nodes []*apiNode)               {}
func testRabbitmqadmin(t *testing.T, nodes []*apiNode)          {}
