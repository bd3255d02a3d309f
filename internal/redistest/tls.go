package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TLSServer is a redis-server that serves TLS on TLSAddr, with a
// certificate for 127.0.0.1 that Config trusts, besides plain TCP on
// Addr (for the test's own admin client).
type TLSServer struct {
	*Server
	TLSAddr string
	Config  *tls.Config
}

// StartTLS starts a redis-server as Start does, with TLS on a second
// free loopback port (clients need no certificate of their own). A
// redis-server built without TLS refuses the directives: t fails.
func StartTLS(t testing.TB) *TLSServer {
	t.Helper()
	ts := &TLSServer{}
	s := launch(t, func(port int, dir string) ([]string, error) {
		tlsPort, err := freePort()
		if err != nil {
			return nil, err
		}
		cert, key, pool, err := selfSigned(dir)
		if err != nil {
			return nil, err
		}
		ts.TLSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
		ts.Config = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
		return startArgs([]string{
			"tls-port " + strconv.Itoa(tlsPort),
			"tls-cert-file " + cert,
			"tls-key-file " + key,
			"tls-ca-cert-file " + cert,
			"tls-auth-clients no",
		})(port, dir)
	})
	ts.Server = s
	return ts
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// into dir, and returns their paths and a pool that trusts it.
func selfSigned(dir string) (certFile, keyFile string, pool *x509.CertPool, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", nil, err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return "", "", nil, err
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool, nil
}
