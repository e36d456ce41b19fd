package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Certificate lifetimes: a throw-away state directory lives as long as one
// process; a --data-dir is meant to be reused, across restarts and days.
const (
	tempCertValidity       = 7 * 24 * time.Hour
	persistentCertValidity = 365 * 24 * time.Hour
	// reusedCertMinValidity is how long reused certificates must still be
	// valid for; a data directory whose certificates expire sooner is
	// refused with a message instead of failing later in a test.
	reusedCertMinValidity = time.Hour
)

// The files of the PKI directory.
const (
	caCertFile         = "ca.crt"
	servingCertFile    = "apiserver.crt"
	servingKeyFile     = "apiserver.key"
	serviceAccountFile = "service-account.key"
	adminCertFile      = "admin.crt"
	adminKeyFile       = "admin.key"
)

// pkiFiles are the files kube-apiserver is started with. The admin client
// credentials are kept in memory too, for the kubeconfig.
type pkiFiles struct {
	caCert            string
	servingCert       string
	servingKey        string
	serviceAccountKey string

	caPEM        []byte
	adminCertPEM []byte
	adminKeyPEM  []byte
}

func pkiPaths(dir string) *pkiFiles {
	return &pkiFiles{
		caCert:            filepath.Join(dir, caCertFile),
		servingCert:       filepath.Join(dir, servingCertFile),
		servingKey:        filepath.Join(dir, servingKeyFile),
		serviceAccountKey: filepath.Join(dir, serviceAccountFile),
	}
}

// writePKI creates a throw-away CA, a serving certificate for 127.0.0.1 and
// localhost, an admin client certificate (group system:masters) and a
// service-account signing key, and writes them to dir.
func writePKI(dir string, validity time.Duration) (*pkiFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	contents, err := generatePKI(validity)
	if err != nil {
		return nil, err
	}
	for name, data := range contents {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	p := pkiPaths(dir)
	p.caPEM = contents[caCertFile]
	p.adminCertPEM = contents[adminCertFile]
	p.adminKeyPEM = contents[adminKeyFile]
	return p, nil
}

// loadOrWritePKI reuses the PKI in dir (a --data-dir's pki/) when it is
// there, so the kubeconfig, the serving certificate and service-account
// tokens stay valid across restarts; otherwise it creates one. A new PKI is
// written to a temporary directory renamed into place, so an interrupted
// start never leaves half a PKI behind. reused says which happened.
func loadOrWritePKI(dir string) (p *pkiFiles, reused bool, err error) {
	if _, err := os.Stat(dir); err == nil {
		p, err := readPKI(dir)
		if err != nil {
			return nil, false, fmt.Errorf("the certificates in %s cannot be reused: %w "+
				"(remove that directory to get new ones; clients must then use the new kubeconfig)", dir, err)
		}
		return p, true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".pki-")
	if err != nil {
		return nil, false, err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	written, err := writePKI(tmp, persistentCertValidity)
	if err != nil {
		return nil, false, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, false, err
	}
	p = pkiPaths(dir)
	p.caPEM, p.adminCertPEM, p.adminKeyPEM = written.caPEM, written.adminCertPEM, written.adminKeyPEM
	return p, false, nil
}

// readPKI reads a PKI written by writePKI and checks that it is usable: every
// file is there, the certificates were issued by the CA, match their keys
// and are valid for a while yet.
func readPKI(dir string) (*pkiFiles, error) {
	contents := map[string][]byte{}
	for _, name := range []string{caCertFile, servingCertFile, servingKeyFile, serviceAccountFile, adminCertFile, adminKeyFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		contents[name] = data
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(contents[caCertFile]) {
		return nil, fmt.Errorf("%s holds no certificate", caCertFile)
	}
	deadline := time.Now().Add(reusedCertMinValidity)
	for _, pair := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
	}{
		{servingCertFile, servingKeyFile, x509.ExtKeyUsageServerAuth},
		{adminCertFile, adminKeyFile, x509.ExtKeyUsageClientAuth},
	} {
		keyPair, err := tls.X509KeyPair(contents[pair.cert], contents[pair.key])
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", pair.cert, pair.key, err)
		}
		cert := keyPair.Leaf
		if cert == nil {
			if cert, err = x509.ParseCertificate(keyPair.Certificate[0]); err != nil {
				return nil, fmt.Errorf("%s: %w", pair.cert, err)
			}
		}
		if _, err := cert.Verify(x509.VerifyOptions{
			Roots:       roots,
			CurrentTime: deadline,
			KeyUsages:   []x509.ExtKeyUsage{pair.usage},
		}); err != nil {
			return nil, fmt.Errorf("%s (valid until %s): %w", pair.cert, cert.NotAfter.Format(time.RFC3339), err)
		}
	}
	block, _ := pem.Decode(contents[serviceAccountFile])
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM key", serviceAccountFile)
	}
	if _, err := x509.ParseECPrivateKey(block.Bytes); err != nil {
		return nil, fmt.Errorf("%s: %w", serviceAccountFile, err)
	}
	p := pkiPaths(dir)
	p.caPEM = contents[caCertFile]
	p.adminCertPEM = contents[adminCertFile]
	p.adminKeyPEM = contents[adminKeyFile]
	return p, nil
}

// generatePKI returns the contents of the PKI files, by file name.
func generatePKI(validity time.Duration) (map[string][]byte, error) {
	now := time.Now().Add(-time.Minute)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kube-testenv-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	issue := func(template *x509.Certificate) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		template.SerialNumber = serial()
		template.NotBefore = now
		template.NotAfter = now.Add(validity)
		template.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER), nil
	}

	servingCert, servingKey, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
	})
	if err != nil {
		return nil, err
	}
	adminCert, adminKey, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-testenv-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		caCertFile:         pemBlock("CERTIFICATE", caDER),
		servingCertFile:    servingCert,
		servingKeyFile:     servingKey,
		serviceAccountFile: pemBlock("EC PRIVATE KEY", saDER),
		adminCertFile:      adminCert,
		adminKeyFile:       adminKey,
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
