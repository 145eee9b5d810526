package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
)

// Log proof headers: the server sends a fresh nonce with every log
// request to an agent, and the agent answers with LogProof of it, so that
// the server relays only what the agent itself sent (a node's address
// could point anywhere; another service there cannot compute the proof).
const (
	LogNonceHeader = "Gandiva-Log-Nonce"
	LogProofHeader = "Gandiva-Log-Proof"
)

// LogProof is the proof an agent gives, in its answer to a log request,
// that it holds key: the hex HMAC-SHA256, under key, of the request's
// nonce and raw query.
func LogProof(key, nonce, rawQuery string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("gandiva-logs\x00" + nonce + "\x00" + rawQuery))
	return hex.EncodeToString(m.Sum(nil))
}

// ValidLogProof reports whether proof is LogProof(key, nonce, rawQuery),
// in constant time.
func ValidLogProof(proof, key, nonce, rawQuery string) bool {
	return hmac.Equal([]byte(proof), []byte(LogProof(key, nonce, rawQuery)))
}

type peerKey struct{}

// withPeer returns ctx carrying the IP address of r's TCP peer.
func withPeer(ctx context.Context, r *http.Request) context.Context {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ctx
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, ip.WithZone("").Unmap())
}

// PeerOf returns the IP address of the TCP peer of the request ctx is
// serving (the handler records it for registrations); false for a call
// made in this process.
func PeerOf(ctx context.Context) (netip.Addr, bool) {
	ip, ok := ctx.Value(peerKey{}).(netip.Addr)
	return ip, ok
}
