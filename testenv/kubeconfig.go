package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

type urlT = url.URL

func mustURL(raw string) urlT {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	return *u
}

// adminClient is an HTTP client that authenticates like the kubeconfig does.
func adminClient(p *pkiFiles) (*http.Client, error) {
	pair, err := tls.X509KeyPair(p.adminCertPEM, p.adminKeyPEM)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.caPEM) {
		return nil, errors.New("bad CA certificate")
	}
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{pair},
			RootCAs:      roots,
			MinVersion:   tls.VersionTLS12,
		}},
	}, nil
}

// apiserverVersion asks the running server for its version, so the ready
// line names what tests really ran against.
func apiserverVersion(client *http.Client, server string) string {
	resp, err := client.Get(server + "/version")
	if err != nil {
		return "unknown"
	}
	defer resp.Body.Close()
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.GitVersion == "" {
		return "unknown"
	}
	return v.GitVersion
}

// writeKubeconfig writes the admin kubeconfig atomically (temp file and
// rename), so a reader never sees half a file. JSON is valid YAML, and every
// kubeconfig reader accepts it.
func writeKubeconfig(path, server string, p *pkiFiles) error {
	b64 := base64.StdEncoding.EncodeToString
	config := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"current-context": "kube-testenv",
		"clusters": []any{map[string]any{
			"name": "kube-testenv",
			"cluster": map[string]any{
				"server":                     server,
				"certificate-authority-data": b64(p.caPEM),
			},
		}},
		"users": []any{map[string]any{
			"name": "kube-testenv-admin",
			"user": map[string]any{
				"client-certificate-data": b64(p.adminCertPEM),
				"client-key-data":         b64(p.adminKeyPEM),
			},
		}},
		"contexts": []any{map[string]any{
			"name": "kube-testenv",
			"context": map[string]any{
				"cluster":   "kube-testenv",
				"user":      "kube-testenv-admin",
				"namespace": "default",
			},
		}},
	}
	data, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubeconfig-")
	if err != nil {
		return fmt.Errorf("cannot write the kubeconfig %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot write the kubeconfig %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cannot write the kubeconfig %s: %w", path, err)
	}
	return nil
}
