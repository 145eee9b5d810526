package cplane

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// MakeCerts' serving certificate verifies against its CA for 127.0.0.1
// and each DNS name, within its validity only; the CA has the key type,
// names and usages asked for; WriteServing writes a pair tls loads.
func TestMakeCerts(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, rsaCA := range []bool{false, true} {
		spec := CertSpec{CAName: "test-ca", CADNSNames: []string{"test-ca"}, RSACA: rsaCA, CAFor: 48 * time.Hour,
			Name: "127.0.0.1", DNSNames: []string{"localhost", "svc.ns.svc"}, For: 24 * time.Hour}
		c, err := MakeCerts(spec, now)
		if err != nil {
			t.Fatal(err)
		}
		ca := parseCert(t, c.CA)
		if !ca.IsCA || ca.Subject.CommonName != "test-ca" || !slices.Equal(ca.DNSNames, []string{"test-ca"}) ||
			!ca.NotAfter.Equal(now.Add(48*time.Hour)) || !ca.NotBefore.Equal(now.Add(-time.Hour)) {
			t.Errorf("RSA %v: CA %+v", rsaCA, ca)
		}
		block, _ := pem.Decode(c.CAKey)
		switch {
		case rsaCA && block.Type == "RSA PRIVATE KEY":
			k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
			if err != nil || !k.PublicKey.Equal(ca.PublicKey.(*rsa.PublicKey)) || ca.KeyUsage&x509.KeyUsageKeyEncipherment == 0 {
				t.Errorf("RSA CA key: %v", err)
			}
		case !rsaCA && block.Type == "EC PRIVATE KEY":
			k, err := x509.ParseECPrivateKey(block.Bytes)
			if err != nil || !k.PublicKey.Equal(ca.PublicKey.(*ecdsa.PublicKey)) || ca.KeyUsage&x509.KeyUsageKeyEncipherment != 0 {
				t.Errorf("EC CA key: %v", err)
			}
		default:
			t.Errorf("RSA %v: CA key is a %s", rsaCA, block.Type)
		}
		cert := parseCert(t, c.Cert)
		if cert.Subject.CommonName != "127.0.0.1" || !cert.NotAfter.Equal(now.Add(24*time.Hour)) {
			t.Errorf("serving certificate %+v", cert)
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		for _, host := range []string{"127.0.0.1", "localhost", "svc.ns.svc"} {
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now}); err != nil {
				t.Errorf("RSA %v: %s: %v", rsaCA, host, err)
			}
		}
		for _, bad := range []x509.VerifyOptions{
			{DNSName: "other.svc", Roots: roots, CurrentTime: now},
			{DNSName: "localhost", Roots: roots, CurrentTime: now.Add(25 * time.Hour)},
			{DNSName: "localhost", Roots: roots, CurrentTime: now.Add(-2 * time.Hour)},
		} {
			if _, err := cert.Verify(bad); err == nil {
				t.Errorf("RSA %v: verifies for %s at %v", rsaCA, bad.DNSName, bad.CurrentTime)
			}
		}
		dir := filepath.Join(t.TempDir(), "certs")
		if err := c.WriteServing(dir); err != nil {
			t.Fatal(err)
		}
		if _, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")); err != nil {
			t.Errorf("written pair: %v", err)
		}
		if fi, err := os.Stat(filepath.Join(dir, "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("tls.key: %v %v", fi, err)
		}
	}
}

func parseCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(p)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", p)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
