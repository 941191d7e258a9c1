// Package membership will discover nodes and detect their failure with
// hashicorp/memberlist. A single node needs none of it yet.
package membership
