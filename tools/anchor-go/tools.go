//go:build tools

// Package tools pins the anchor-go generator in its own module, so its
// dependencies stay out of the main module's graph.
package tools

import _ "github.com/gagliardetto/anchor-go"
