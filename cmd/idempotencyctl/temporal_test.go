package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parseTemporal parses args as decide's connection flags with env as the
// environment. Unless env names a configuration file, it names one that
// does not exist, so a developer's own temporal.toml never leaks in.
func parseTemporal(t *testing.T, env map[string]string, args ...string) (temporalConfig, error) {
	t.Helper()
	e := map[string]string{envTemporalConfigFile: filepath.Join(t.TempDir(), "absent.toml")}
	for k, v := range env {
		e[k] = v
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tf := defineTemporalFlags(fs, func(k string) string { return e[k] })
	require.NoError(t, fs.Parse(args))
	return tf.resolve()
}

// writeFile writes content to name in a fresh directory and returns its
// path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// pair is a certificate and its key on disk, named by the certificate's
// common name.
type pair struct{ name, cert, key string }

// writePair writes a self-signed CA certificate named name as PEM, and its
// key.
func writePair(t *testing.T, name string) pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pair{
		name: name,
		cert: writeFile(t, name+".pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))),
		key:  writeFile(t, name+".key", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))),
	}
}

// writeCA writes a self-signed CA certificate as PEM and returns its path.
func writeCA(t *testing.T) string { return writePair(t, "test CA").cert }

// tlsOfConfig returns the TLS configuration cfg dials with; nil for plain
// text.
func tlsOfConfig(cfg temporalConfig) *tls.Config {
	if cfg.opts.ConnectionOptions.TLSDisabled {
		return nil
	}
	return cfg.opts.ConnectionOptions.TLS
}

// clientCertName is the common name of the client certificate cfg
// presents; empty for none.
func clientCertName(t *testing.T, cfg temporalConfig) string {
	t.Helper()
	c := tlsOfConfig(cfg)
	if c == nil || len(c.Certificates) == 0 {
		return ""
	}
	leaf, err := x509.ParseCertificate(c.Certificates[0].Certificate[0])
	require.NoError(t, err)
	return leaf.Subject.CommonName
}

// caName is the common name of the one CA cfg trusts; empty for the
// system's.
func caName(t *testing.T, cfg temporalConfig, cas ...pair) string {
	t.Helper()
	c := tlsOfConfig(cfg)
	if c == nil || c.RootCAs == nil {
		return ""
	}
	for _, ca := range cas {
		b, err := os.ReadFile(ca.cert)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(b))
		if pool.Equal(c.RootCAs) {
			return ca.name
		}
	}
	return "another CA"
}

func TestTemporalDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := parseTemporal(t, nil)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7233", cfg.opts.HostPort, "the temporal CLI's default address")
	assert.Equal(t, "default", cfg.opts.Namespace)
	assert.Nil(t, tlsOfConfig(cfg), "plain text")
	assert.Nil(t, cfg.opts.Credentials)
	assert.Empty(t, cfg.from, "no profile applied")
}

// A setting comes from the flag, else the environment, else the profile
// of the configuration file, else the default.
func TestTemporalPrecedence(t *testing.T) {
	t.Parallel()
	conf := writeFile(t, "temporal.toml", `
[profile.default]
address = "file:7233"
namespace = "file-ns"
api_key = "file-key"
`)
	env := map[string]string{envTemporalAddress: "env:7233", envTemporalNamespace: "env-ns", envTemporalAPIKey: "env-key"}
	flags := []string{"-address", "flag:7233", "-namespace", "flag-ns", "-api-key", "flag-key"}
	tests := []struct {
		name               string
		file               bool
		env                bool
		flags              bool
		address, ns, key   string
		profileApplied     bool
		tlsImpliedByTheKey bool
	}{
		{"default", false, false, false, "127.0.0.1:7233", "default", "", false, false},
		{"profile over default", true, false, false, "file:7233", "file-ns", "file-key", true, true},
		{"environment over profile", true, true, false, "env:7233", "env-ns", "env-key", true, true},
		{"environment alone", false, true, false, "env:7233", "env-ns", "env-key", false, true},
		{"flag over environment and profile", true, true, true, "flag:7233", "flag-ns", "flag-key", true, true},
		{"flag over profile", true, false, true, "flag:7233", "flag-ns", "flag-key", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := map[string]string{}
			if tt.file {
				e[envTemporalConfigFile] = conf
			}
			if tt.env {
				for k, v := range env {
					e[k] = v
				}
			}
			var args []string
			if tt.flags {
				args = flags
			}
			cfg, err := parseTemporal(t, e, args...)
			require.NoError(t, err)
			assert.Equal(t, tt.address, cfg.opts.HostPort)
			assert.Equal(t, tt.address, cfg.address)
			assert.Equal(t, tt.ns, cfg.opts.Namespace)
			assert.Equal(t, tt.ns, cfg.namespace)
			assert.Equal(t, tt.key, cfg.apiKey)
			assert.Equal(t, tt.key != "", cfg.opts.Credentials != nil)
			assert.Equal(t, tt.tlsImpliedByTheKey, tlsOfConfig(cfg) != nil, "an API key implies TLS")
			if tt.profileApplied {
				assert.Equal(t, `, profile "default" of `+conf, cfg.from)
			} else {
				assert.Empty(t, cfg.from)
			}
		})
	}
}

// The TLS files follow the same order, and the names this command read
// before the temporal CLI's ($TEMPORAL_TLS_CERT, _KEY, _CA) still apply
// where the CLI's are unset: over the profile, under the CLI's names and
// the flags.
func TestTemporalTLSPrecedence(t *testing.T) {
	t.Parallel()
	file, legacy, env, flagged := writePair(t, "file"), writePair(t, "legacy"), writePair(t, "env"), writePair(t, "flag")
	conf := writeFile(t, "temporal.toml", `
[profile.default]
address = "file:7233"
[profile.default.tls]
client_cert_path = "`+file.cert+`"
client_key_path = "`+file.key+`"
server_ca_cert_path = "`+file.cert+`"
server_name = "file.example"
`)
	legacyEnv := map[string]string{envLegacyTLSCert: legacy.cert, envLegacyTLSKey: legacy.key, envLegacyTLSCA: legacy.cert}
	newEnv := map[string]string{envTemporalTLSCertPath: env.cert, envTemporalTLSKeyPath: env.key, envTemporalTLSCAPath: env.cert, envTemporalTLSServerName: "env.example"}
	flags := []string{"-tls-cert-path", flagged.cert, "-tls-key-path", flagged.key, "-tls-ca-path", flagged.cert, "-tls-server-name", "flag.example"}
	tests := []struct {
		name              string
		file, legacy, env bool
		flags             bool
		want, wantServer  string
		wantTLS           bool
	}{
		{"nothing: plain text", false, false, false, false, "", "", false},
		{"profile", true, false, false, false, "file", "file.example", true},
		{"the older names alone", false, true, false, false, "legacy", "", true},
		{"the older names over the profile", true, true, false, false, "legacy", "file.example", true},
		{"the CLI's names over the older ones", true, true, true, false, "env", "env.example", true},
		{"flags over everything", true, true, true, true, "flag", "flag.example", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := map[string]string{}
			if tt.file {
				e[envTemporalConfigFile] = conf
			}
			if tt.legacy {
				for k, v := range legacyEnv {
					e[k] = v
				}
			}
			if tt.env {
				for k, v := range newEnv {
					e[k] = v
				}
			}
			var args []string
			if tt.flags {
				args = flags
			}
			cfg, err := parseTemporal(t, e, args...)
			require.NoError(t, err)
			require.Equal(t, tt.wantTLS, tlsOfConfig(cfg) != nil)
			if !tt.wantTLS {
				return
			}
			assert.Equal(t, tt.want, clientCertName(t, cfg), "the client certificate")
			assert.Equal(t, tt.want, caName(t, cfg, file, legacy, env, flagged), "the server's CA")
			assert.Equal(t, tt.wantServer, tlsOfConfig(cfg).ServerName)
		})
	}

	// One older name beside the CLI's for another file: each applies.
	cfg, err := parseTemporal(t, map[string]string{envLegacyTLSCA: legacy.cert, envTemporalTLSCertPath: env.cert, envTemporalTLSKeyPath: env.key})
	require.NoError(t, err)
	assert.Equal(t, "env", clientCertName(t, cfg))
	assert.Equal(t, "legacy", caName(t, cfg, legacy, env))

	// A flag's path replaces the bytes a profile gave for the same file.
	certPEM, err := os.ReadFile(file.cert)
	require.NoError(t, err)
	keyPEM, err := os.ReadFile(file.key)
	require.NoError(t, err)
	inline := writeFile(t, "inline.toml", "[profile.default.tls]\nclient_cert_data = '''\n"+string(certPEM)+"'''\nclient_key_data = '''\n"+string(keyPEM)+"'''\n")
	cfg, err = parseTemporal(t, map[string]string{envTemporalConfigFile: inline})
	require.NoError(t, err)
	assert.Equal(t, "file", clientCertName(t, cfg), "the profile's inline certificate")
	cfg, err = parseTemporal(t, map[string]string{envTemporalConfigFile: inline}, "-tls-cert-path", flagged.cert, "-tls-key-path", flagged.key)
	require.NoError(t, err)
	assert.Equal(t, "flag", clientCertName(t, cfg), "the flags' files, not the profile's bytes")
}

// $TEMPORAL_CONFIG_FILE naming no file is ignored, as the temporal CLI
// ignores it: the variables and the defaults apply.
func TestTemporalConfigFileVariableWithoutAFile(t *testing.T) {
	t.Parallel()
	cfg, err := parseTemporal(t, map[string]string{envTemporalConfigFile: filepath.Join(t.TempDir(), "absent.toml"), envTemporalAddress: "env:7233"})
	require.NoError(t, err)
	assert.Equal(t, "env:7233", cfg.opts.HostPort)
	assert.Empty(t, cfg.from)
}

// The profile comes from -profile, else $TEMPORAL_PROFILE, else "default";
// the file from -config-file, else $TEMPORAL_CONFIG_FILE, else the
// default location.
func TestTemporalProfileAndFile(t *testing.T) {
	t.Parallel()
	a := writeFile(t, "a.toml", `
[profile.default]
address = "a-default:7233"
[profile.staging]
address = "a-staging:7233"
namespace = "staging"
[profile.prod]
address = "a-prod:7233"
`)
	b := writeFile(t, "b.toml", `
[profile.default]
address = "b-default:7233"
[profile.prod]
address = "b-prod:7233"
`)
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		want  string
		wantN string
	}{
		{"the default profile", map[string]string{envTemporalConfigFile: a}, nil, "a-default:7233", "default"},
		{"$TEMPORAL_PROFILE", map[string]string{envTemporalConfigFile: a, envTemporalProfile: "staging"}, nil, "a-staging:7233", "staging"},
		{"-profile over $TEMPORAL_PROFILE", map[string]string{envTemporalConfigFile: a, envTemporalProfile: "staging"}, []string{"-profile", "prod"}, "a-prod:7233", "default"},
		{"-config-file over $TEMPORAL_CONFIG_FILE", map[string]string{envTemporalConfigFile: a, envTemporalProfile: "prod"}, []string{"-config-file", b}, "b-prod:7233", "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseTemporal(t, tt.env, tt.args...)
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.opts.HostPort)
			assert.Equal(t, tt.wantN, cfg.opts.Namespace)
		})
	}

	// gRPC metadata and the authority of the profile reach the client.
	meta := writeFile(t, "meta.toml", "[profile.default]\nauthority = \"frontend.internal\"\n[profile.default.grpc_meta]\nx-tenant-route = \"eu-1\"\n")
	cfg, err := parseTemporal(t, map[string]string{envTemporalConfigFile: meta})
	require.NoError(t, err)
	require.NotNil(t, cfg.opts.HeadersProvider)
	h, err := cfg.opts.HeadersProvider.GetHeaders(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"x-tenant-route": "eu-1"}, h)
	assert.Equal(t, "frontend.internal", cfg.opts.ConnectionOptions.Authority)
}

// Without -config-file or $TEMPORAL_CONFIG_FILE the file is where the SDK
// (and the temporal CLI) look: temporalio/temporal.toml in the user's
// configuration directory.
func TestTemporalDefaultFileLocation(t *testing.T) { // not parallel: it sets the process's environment
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "temporalio"), 0o700))
	path := filepath.Join(dir, "temporalio", "temporal.toml")
	require.NoError(t, os.WriteFile(path, []byte("[profile.default]\naddress = \"home:7233\"\n"), 0o600))
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tf := defineTemporalFlags(fs, func(string) string { return "" })
	require.NoError(t, fs.Parse(nil))
	cfg, err := tf.resolve()
	require.NoError(t, err)
	assert.Equal(t, "home:7233", cfg.opts.HostPort)
	assert.Equal(t, `, profile "default" of `+path, cfg.from)
}

// A configuration the operator cannot have meant is refused, naming the
// file, the profile and where each came from; nothing is contacted.
func TestTemporalBadConfiguration(t *testing.T) {
	t.Parallel()
	conf := writeFile(t, "temporal.toml", "[profile.default]\naddress = \"a:7233\"\n[profile.staging]\naddress = \"s:7233\"\n")
	absent := filepath.Join(t.TempDir(), "absent.toml")
	notToml := writeFile(t, "broken.toml", "[profile.default\naddress = ")
	dir := t.TempDir() // a directory is not a file anyone can read
	ca := writeCA(t)
	notPEM := writeFile(t, "ca.txt", "not a certificate")
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"a profile the file lacks, by variable", map[string]string{envTemporalConfigFile: conf, envTemporalProfile: "prod"}, nil,
			[]string{`profile "prod" ($TEMPORAL_PROFILE) is not in the Temporal configuration file ` + conf + ` ($TEMPORAL_CONFIG_FILE)`, `it has "default", "staging"`}},
		{"a profile the file lacks, by flag", map[string]string{envTemporalConfigFile: conf}, []string{"-profile", "prod"},
			[]string{`profile "prod" (-profile) is not in the Temporal configuration file ` + conf}},
		{"a profile, and no file", map[string]string{envTemporalConfigFile: absent, envTemporalProfile: "prod"}, nil,
			[]string{`profile "prod" ($TEMPORAL_PROFILE) cannot be read: the Temporal configuration file ` + absent + ` ($TEMPORAL_CONFIG_FILE) does not exist`}},
		{"a -config-file that does not exist", nil, []string{"-config-file", absent}, []string{"-config-file " + absent + " does not exist"}},
		{"a file that cannot be read", map[string]string{envTemporalConfigFile: dir}, nil,
			[]string{"the Temporal configuration file " + dir + " ($TEMPORAL_CONFIG_FILE)", "is a directory"}},
		{"a file that is not TOML", nil, []string{"-config-file", notToml},
			[]string{"the Temporal configuration file " + notToml + " (-config-file)", "failed parsing config"}},
		{"$TEMPORAL_TLS that is not a boolean", map[string]string{envTemporalTLS: "maybe"}, nil, []string{`$TEMPORAL_TLS is "maybe", not true or false`}},
		{"half a key pair, by the older name", map[string]string{envLegacyTLSCert: ca}, nil, []string{"the client certificate and its key go together"}},
		{"half a key pair, in the profile", map[string]string{envTemporalConfigFile: writeFile(t, "half.toml", "[profile.default.tls]\nclient_key_path = \"/k.pem\"\n")}, nil,
			[]string{"the client certificate and its key go together"}},
		{"a CA that is not PEM", nil, []string{"-tls-ca-path", notPEM}, []string{"the server CA certificate \"" + notPEM + "\" holds no PEM certificate"}},
		{"a CA that is missing", map[string]string{envTemporalTLSCAPath: "/nonexistent-ca.pem"}, nil, []string{"the server CA certificate: open /nonexistent-ca.pem"}},
		{"a certificate that is missing", nil, []string{"-tls-cert-path", "/nonexistent.pem", "-tls-key-path", "/nonexistent.key"},
			[]string{"the Temporal connection settings", "open /nonexistent.pem"}},
		{"a missing certificate named by the profile", map[string]string{envTemporalConfigFile: writeFile(t, "gone.toml", "[profile.default.tls]\nclient_cert_path = \"/gone.pem\"\nclient_key_path = \"/gone.key\"\n")}, nil,
			[]string{`the Temporal connection settings, profile "default" of `, "open /gone.pem"}},
		{"-tls=false and an API key flag", nil, []string{"-tls=false", "-api-key", "k"}, []string{"-tls=false contradicts"}},
		{"an empty -address", nil, []string{"-address", ""}, []string{"-address is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseTemporal(t, tt.env, tt.args...)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

// TLS is on when anything asks for it, as with the temporal CLI, and off
// when -tls=false or $TEMPORAL_TLS=false says so.
func TestTemporalTLSSwitch(t *testing.T) {
	t.Parallel()
	ca := writeCA(t)
	disabled := writeFile(t, "disabled.toml", "[profile.default]\napi_key = \"k\"\n[profile.default.tls]\ndisabled = true\n")
	tests := []struct {
		name string
		env  map[string]string
		args []string
		on   bool
	}{
		{"$TEMPORAL_TLS", map[string]string{envTemporalTLS: "1"}, nil, true},
		{"-tls=false over $TEMPORAL_TLS", map[string]string{envTemporalTLS: "true"}, []string{"-tls=false"}, false},
		{"an API key", map[string]string{envTemporalAPIKey: "k"}, nil, true},
		{"$TEMPORAL_TLS=false over an API key", map[string]string{envTemporalAPIKey: "k", envTemporalTLS: "false"}, nil, false},
		{"a CA", nil, []string{"-tls-ca-path", ca}, true},
		{"a server name", map[string]string{envTemporalTLSServerName: "frontend.example"}, nil, true},
		{"-tls-disable-host-verification=false alone", nil, []string{"-tls-disable-host-verification=false"}, false},
		{"-tls-disable-host-verification", nil, []string{"-tls-disable-host-verification"}, true},
		{"the profile's disabled", map[string]string{envTemporalConfigFile: disabled}, nil, false},
		{"-tls over the profile's disabled", map[string]string{envTemporalConfigFile: disabled}, []string{"-tls"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseTemporal(t, tt.env, tt.args...)
			require.NoError(t, err)
			assert.Equal(t, tt.on, tlsOfConfig(cfg) != nil)
		})
	}

	cfg, err := parseTemporal(t, map[string]string{envTemporalTLSNoHostCheck: "true", envTemporalTLSServerName: "frontend.example"},
		"-tls-disable-host-verification=false")
	require.NoError(t, err)
	require.NotNil(t, tlsOfConfig(cfg))
	assert.False(t, tlsOfConfig(cfg).InsecureSkipVerify, "the flag wins over the variable")
	assert.Equal(t, "frontend.example", tlsOfConfig(cfg).ServerName)
}

// Messages name where the settings came from.
func TestTemporalDialNamesTheProfile(t *testing.T) {
	t.Parallel()
	conf := writeFile(t, "temporal.toml", "[profile.ops]\naddress = \"127.0.0.1:1\"\nnamespace = \"ops-ns\"\n")
	cfg, err := parseTemporal(t, map[string]string{envTemporalConfigFile: conf, envTemporalProfile: "ops"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = cfg.dial(ctx)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), `cannot reach Temporal at 127.0.0.1:1 (namespace ops-ns, profile "ops" of `+conf+`)`), err.Error())
}
