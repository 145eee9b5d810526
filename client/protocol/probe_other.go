//go:build !linux

package protocol

import "errors"

// ProbeCheckpoint is only implemented on Linux, the platform of the node
// agent (its only caller); elsewhere it refuses to look.
func ProbeCheckpoint(dir string) (Meta, error) {
	return Meta{}, errors.New("checkpoint probe: not supported on this platform")
}
