package netfault_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tesserix/idempotency/internal/netfault"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo starts a server that answers every line with the same line.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T) (*netfault.Proxy, net.Conn, *bufio.Reader) {
	t.Helper()
	p, err := netfault.Start(echo(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return p, c, bufio.NewReader(c)
}

// roundTrip sends line and reads the answer, giving up after wait.
func roundTrip(c net.Conn, r *bufio.Reader, line string, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return readLine(c, r, wait)
}

func readLine(c net.Conn, r *bufio.Reader, wait time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	s, err := r.ReadString('\n')
	return s, err
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

func TestForwards(t *testing.T) {
	_, c, r := start(t)
	got, err := roundTrip(c, r, "hello", 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "hello\n", got)
}

// A stalled reply is held, not lost: it arrives once the direction
// resumes, and the other direction kept flowing meanwhile (the server
// received the request and answered).
func TestStallHoldsTheRepliesUntilResumed(t *testing.T) {
	p, c, r := start(t)
	p.Stall(netfault.Down)
	_, err := roundTrip(c, r, "held", 200*time.Millisecond)
	require.True(t, isTimeout(err), "a stalled reply must not arrive: %v", err)
	p.Resume(netfault.Down)
	got, err := readLine(c, r, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "held\n", got)
}

// A delayed reply arrives after the caller gave up on it, which is the
// lost reply of a store call whose context ended.
func TestDelayOutlastsAShortDeadline(t *testing.T) {
	p, c, r := start(t)
	p.SetDelay(netfault.Down, 2*time.Second)
	_, err := roundTrip(c, r, "late", 100*time.Millisecond)
	require.True(t, isTimeout(err), "the reply came before its delay: %v", err)
	got, err := readLine(c, r, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "late\n", got)
	p.Heal()
	got, err = roundTrip(c, r, "prompt", 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "prompt\n", got)
}

// A cut reply delivers its first half, then the connection ends.
func TestCutNextDropsTheConnectionMidReply(t *testing.T) {
	p, c, r := start(t)
	p.CutNext(netfault.Down, 1)
	_, err := c.Write([]byte("0123456789\n"))
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(r)
	require.NoError(t, err, "the connection ends with EOF")
	assert.Equal(t, "01234", string(got), "half of the reply (5 of 11 bytes), then nothing")
	assert.Equal(t, 1, p.Stats().Cut)

	// The next connection is whole again.
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	got2, err := roundTrip(c2, bufio.NewReader(c2), "whole", 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "whole\n", got2)
}

func TestRefuseAndCutAll(t *testing.T) {
	p, c, r := start(t)
	_, err := roundTrip(c, r, "before", 5*time.Second)
	require.NoError(t, err)
	p.CutAll()
	_, err = readLine(c, r, 5*time.Second)
	require.ErrorIs(t, err, io.EOF, "a cut connection ends")

	p.Refuse(true)
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	_, err = roundTrip(c2, bufio.NewReader(c2), "refused", 5*time.Second)
	require.Error(t, err)
	assert.False(t, isTimeout(err), "refused at once, not hung: %v", err)
	assert.Equal(t, 1, p.Stats().Refused)

	p.Refuse(false)
	c3, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c3.Close()
	got, err := roundTrip(c3, bufio.NewReader(c3), "again", 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "again\n", got)
}
