package cplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CertSpec says what MakeCerts makes.
type CertSpec struct {
	CAName     string        // the CA's common name
	CADNSNames []string      // the CA's DNS names (some controllers check them)
	RSACA      bool          // an RSA-2048 CA key, PEM as PKCS#1, with key encipherment among its usages; else ECDSA P-256
	CAFor      time.Duration // how long the CA is valid after now
	Name       string        // the serving certificate's common name
	DNSNames   []string      // its DNS names; it is for 127.0.0.1 too
	For        time.Duration // how long it is valid after now
}

// Certs are a CA, its key, and a serving certificate and key the CA
// signed, all PEM.
type Certs struct {
	CA, CAKey, Cert, Key []byte
}

// MakeCerts makes a CA and a serving certificate it signed for 127.0.0.1
// and spec's DNS names, both valid from an hour before now. The serving
// key is ECDSA P-256: quick to make on a loaded machine.
func MakeCerts(spec CertSpec, now time.Time) (*Certs, error) {
	var (
		caKey    crypto.Signer
		caKeyPEM []byte
		usage    = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	)
	if spec.RSACA {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		caKey, usage = k, usage|x509.KeyUsageKeyEncipherment
		caKeyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		caKey, caKeyPEM = k, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: spec.CAName},
		DNSNames:              spec.CADNSNames,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(spec.CAFor),
		KeyUsage:              usage,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: spec.Name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(spec.For),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     spec.DNSNames,
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Certs{
		CA:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CAKey: caKeyPEM,
		Cert:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// WriteServing writes the serving certificate and key to dir/tls.crt and
// dir/tls.key (the names controller-runtime's webhook server reads),
// making dir if it is missing.
func (c *Certs) WriteServing(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), c.Cert, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), c.Key, 0o600)
}

// makeCerts makes a CA, the API server's serving certificate and key signed
// by it (for 127.0.0.1 and localhost), and the service-account signing key,
// all PEM. ECDSA P-256: quick to make on a loaded machine.
func makeCerts() (caPEM, certPEM, keyPEM, saPEM []byte, err error) {
	c, err := MakeCerts(CertSpec{
		CAName: "gandiva-local-ca", CAFor: 7 * 24 * time.Hour,
		Name: "kube-apiserver", For: 7 * 24 * time.Hour,
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}, time.Now())
	if err != nil {
		return nil, nil, nil, nil, err
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	saDER, err := x509.MarshalECPrivateKey(sa)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return c.CA, c.Cert, c.Key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER}), nil
}
