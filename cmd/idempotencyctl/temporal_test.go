package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parseTemporal parses args as decide's connection flags with env as the
// environment.
func parseTemporal(t *testing.T, env map[string]string, args ...string) (temporalConfig, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tf := defineTemporalFlags(fs, func(k string) string { return env[k] })
	require.NoError(t, fs.Parse(args))
	return tf.resolve()
}

// writeCA writes a self-signed CA certificate as PEM and returns its path.
func writeCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return path
}

func TestTemporalFlags(t *testing.T) {
	t.Parallel()
	ca := writeCA(t)

	cfg, err := parseTemporal(t, nil)
	require.NoError(t, err)
	assert.Equal(t, temporalConfig{address: "127.0.0.1:7233", namespace: "default"}, cfg, "the temporal CLI's defaults, plain text")

	env := map[string]string{
		envTemporalAddress: "env:7233", envTemporalNamespace: "env-ns", envTemporalAPIKey: "env-key",
		envTemporalTLSCA: ca, envTemporalTLSServerName: "frontend.example", envTemporalTLSNoHostCheck: "true",
	}
	cfg, err = parseTemporal(t, env)
	require.NoError(t, err)
	assert.Equal(t, "env:7233", cfg.address)
	assert.Equal(t, "env-ns", cfg.namespace)
	assert.Equal(t, "env-key", cfg.apiKey)
	require.NotNil(t, cfg.tls, "an API key and a CA imply TLS")
	assert.Equal(t, "frontend.example", cfg.tls.ServerName)
	assert.True(t, cfg.tls.InsecureSkipVerify)
	assert.NotNil(t, cfg.tls.RootCAs)

	cfg, err = parseTemporal(t, env, "-address", "flag:7233", "-namespace", "flag-ns", "-api-key", "flag-key", "-tls-disable-host-verification=false")
	require.NoError(t, err)
	assert.Equal(t, "flag:7233", cfg.address, "flags win over the environment")
	assert.Equal(t, "flag-ns", cfg.namespace)
	assert.Equal(t, "flag-key", cfg.apiKey)
	assert.False(t, cfg.tls.InsecureSkipVerify)

	cfg, err = parseTemporal(t, map[string]string{envTemporalTLS: "1"})
	require.NoError(t, err)
	assert.NotNil(t, cfg.tls, "$TEMPORAL_TLS turns TLS on")

	cfg, err = parseTemporal(t, map[string]string{envTemporalTLS: "true"}, "-tls=false")
	require.NoError(t, err)
	assert.Nil(t, cfg.tls, "-tls=false wins over $TEMPORAL_TLS")

	_, err = parseTemporal(t, map[string]string{envTemporalTLS: "maybe"})
	assert.ErrorContains(t, err, `$TEMPORAL_TLS is "maybe", not true or false`)

	_, err = parseTemporal(t, map[string]string{envTemporalTLSCert: ca})
	assert.ErrorContains(t, err, "-tls-cert-path and -tls-key-path go together", "$TEMPORAL_TLS_CERT fills -tls-cert-path")

	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	_, err = parseTemporal(t, nil, "-tls-ca-path", notPEM)
	assert.ErrorContains(t, err, "holds no PEM certificate")
}
