package management_test

import "testing"

func testReplicas(t *testing.T, nodes []*apiNode)               {}
func testRabbitmqadmin(t *testing.T, nodes []*apiNode)          {}
