package nodetest

// Kill stops the node abruptly (node.Node.Kill): the others see it fail,
// and no queue leadership is handed off. Start brings it back.
func (m *Member) Kill() {
	if m.Node == nil {
		return
	}
	m.Node.Kill()
	m.Node = nil
}
