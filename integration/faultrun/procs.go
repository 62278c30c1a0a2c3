package faultrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrMissingTool matches the error Run returns when a program it needs to
// start a private store (initdb, pg_ctl, redis-server) is not installed.
var ErrMissingTool = errors.New("faultrun: a program the run needs is not installed")

// proc is a child process in a process group of its own, killed with its
// group, and killed by the kernel if the run's thread that started it dies
// (Pdeathsig).
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startProc(argv []string, env []string, logPath string) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = f, f
		defer func() { _ = f.Close() }()
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// kill SIGKILLs the process group and waits for the process.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// instance is a private store server the run starts, kills and restarts.
type instance interface {
	// addr is what a store client is given: a PostgreSQL URL, a Redis
	// host:port.
	addr() string
	// endpoint is the server's host:port, and via(hostport) the address
	// that reaches it through hostport instead (a proxy in front of it).
	endpoint() string
	via(hostport string) string
	kill() error
	start() error
	close()
}

// privatePostgres is a PostgreSQL cluster of the run's own: initdb into a
// temporary directory, pg_ctl start on a free port. Under root it runs as
// the postgres OS user.
type privatePostgres struct {
	pgCtl  string
	dir    string
	port   int
	asUser []string
	extra  []string // -c name=value options start passes after its own
}

func findPostgresBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name); len(m) > 0 {
		return m[len(m)-1], nil
	}
	return "", fmt.Errorf("%w: %s not found on PATH nor in /usr/lib/postgresql/*/bin", ErrMissingTool, name)
}

func newPrivatePostgres(extra ...string) (*privatePostgres, error) {
	initdb, err := findPostgresBinary("initdb")
	if err != nil {
		return nil, err
	}
	p, err := preparePrivatePostgres(extra...)
	if err != nil {
		return nil, err
	}
	if out, err := p.run(initdb, "-D", p.data(), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		p.close()
		return nil, fmt.Errorf("faultrun: initdb: %w\n%s", err, out)
	}
	if err := p.start(); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// preparePrivatePostgres makes a server's directory, owned by the user it
// runs as, and picks its port; nothing runs yet.
func preparePrivatePostgres(extra ...string) (*privatePostgres, error) {
	pgCtl, err := findPostgresBinary("pg_ctl")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "faultrun-pg-")
	if err != nil {
		return nil, err
	}
	p := &privatePostgres{pgCtl: pgCtl, dir: dir, extra: extra}
	if err := os.Chmod(dir, 0o755); err != nil {
		p.close()
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			p.close()
			return nil, fmt.Errorf("faultrun: running as root and no postgres OS user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			p.close()
			return nil, err
		}
		p.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	if p.port, err = freePort(); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *privatePostgres) data() string { return filepath.Join(p.dir, "data") }

func (p *privatePostgres) run(name string, args ...string) (string, error) {
	argv := append(append(append([]string(nil), p.asUser...), name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = p.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (p *privatePostgres) addr() string { return p.via(p.endpoint()) }

func (p *privatePostgres) endpoint() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *privatePostgres) via(hostport string) string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable&connect_timeout=2", hostport)
}

func (p *privatePostgres) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=100", p.port, p.dir)
	for _, o := range p.extra {
		opts += " -c " + o
	}
	out, err := p.run(p.pgCtl, "-D", p.data(), "-l", filepath.Join(p.dir, "log"), "-o", opts, "-w", "-t", "60", "start")
	if err != nil {
		return fmt.Errorf("faultrun: pg_ctl start: %w\n%s", err, out)
	}
	return nil
}

// kill stops the server the hard way: pg_ctl stop -m immediate, which
// quits without a checkpoint; the next start runs crash recovery.
func (p *privatePostgres) kill() error {
	out, err := p.run(p.pgCtl, "-D", p.data(), "-m", "immediate", "-w", "-t", "60", "stop")
	if err != nil {
		return fmt.Errorf("faultrun: pg_ctl stop -m immediate: %w\n%s", err, out)
	}
	return nil
}

func (p *privatePostgres) close() {
	if _, err := os.Stat(filepath.Join(p.data(), "postmaster.pid")); err == nil {
		_, _ = p.run(p.pgCtl, "-D", p.data(), "-m", "immediate", "-w", "stop")
	}
	_ = os.RemoveAll(p.dir)
}

// privateRedis is a redis-server child of the run, with the append-only
// file on (fsync always) or, for the control round, no persistence at all.
type privateRedis struct {
	mu      sync.Mutex
	dir     string
	port    int
	persist bool
	p       *proc
}

func newPrivateRedis(persist bool) (*privateRedis, error) {
	dir, err := os.MkdirTemp("", "faultrun-redis-")
	if err != nil {
		return nil, err
	}
	r := &privateRedis{dir: dir, persist: persist}
	if r.port, err = freePort(); err != nil {
		r.close()
		return nil, err
	}
	if err := r.start(); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *privateRedis) addr() string { return r.endpoint() }

func (r *privateRedis) endpoint() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *privateRedis) via(hostport string) string { return hostport }

func (r *privateRedis) start() error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMissingTool, err)
	}
	aof := "no"
	if r.persist {
		aof = "yes"
	}
	p, err := startProc([]string{bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", aof, "--appendfsync", "always",
		"--dir", r.dir, "--logfile", filepath.Join(r.dir, "log")}, nil, "")
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.p = p
	r.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	defer func() { _ = c.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("faultrun: private redis-server on %s did not answer: %w", r.addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill SIGKILLs redis-server.
func (r *privateRedis) kill() error {
	r.mu.Lock()
	p := r.p
	r.mu.Unlock()
	if p != nil {
		p.kill()
	}
	return nil
}

func (r *privateRedis) close() {
	_ = r.kill()
	_ = os.RemoveAll(r.dir)
}

// workerPool holds the run's worker processes, by slot.
type workerPool struct {
	argv   func() []string
	env    []string
	logDir string
	// previous, when set, starts every other process (argv and env only).
	previous *workerPool

	mu    sync.Mutex
	procs []*proc
	n     int
}

func (w *workerPool) spawn() (*proc, error) {
	w.mu.Lock()
	w.n++
	n := w.n
	w.mu.Unlock()
	if w.previous != nil && n%2 == 0 {
		return startProc(w.previous.argv(), w.previous.env, filepath.Join(w.logDir, fmt.Sprintf("worker-%d-previous.log", n)))
	}
	return startProc(w.argv(), w.env, filepath.Join(w.logDir, fmt.Sprintf("worker-%d.log", n)))
}

// add starts a worker in a new slot.
func (w *workerPool) add() error {
	p, err := w.spawn()
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.procs = append(w.procs, p)
	w.mu.Unlock()
	return nil
}

// killAt SIGKILLs the worker in slot i.
func (w *workerPool) killAt(i int) {
	w.mu.Lock()
	p := w.procs[i]
	w.mu.Unlock()
	p.kill()
}

// replace starts a new worker in slot i.
func (w *workerPool) replace(i int) error {
	p, err := w.spawn()
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.procs[i] = p
	w.mu.Unlock()
	return nil
}

// killAll SIGKILLs every worker.
func (w *workerPool) killAll() {
	w.mu.Lock()
	procs := append([]*proc(nil), w.procs...)
	w.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
}
