package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// A DirLock is an exclusive lock on a data directory, held with flock(2) on
// the file LOCK in it. The kernel releases it when the process dies.
type DirLock struct {
	mu sync.Mutex
	f  *os.File // nil once unlocked
}

// LockDir creates dir if missing and locks it, writing the pid of this
// process into dir/LOCK. A directory it creates is 0700 and LOCK 0600; an
// existing directory or LOCK loses its group and other permissions. If the
// directory is locked already (by another process, or by another DirLock of
// this one) it returns an error matching ErrLocked whose message names the
// directory and the holder's pid.
func LockDir(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("journal: lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("journal: lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readPID(f)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is in use by %s (lock file %s): %w", ErrLocked, dir, holder, path, err)
		}
		return nil, fmt.Errorf("journal: lock %s: %w", path, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("journal: lock %s: write pid: %w", path, err)
	}
	for _, p := range []string{dir, path} {
		if err := restrict(p); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("journal: lock %s: restrict permissions: %w", dir, err)
		}
	}
	return &DirLock{f: f}, nil
}

// readPID describes the process named in a lock file.
func readPID(f *os.File) string {
	var buf [32]byte
	n, _ := f.ReadAt(buf[:], 0)
	s := string(bytes.TrimSpace(buf[:n]))
	if pid, err := strconv.Atoi(s); err == nil && pid > 0 {
		return "pid " + s
	}
	return "another process (pid unknown)"
}

// Unlock releases the lock. It is idempotent and safe for concurrent use.
func (l *DirLock) Unlock() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	if err != nil {
		return fmt.Errorf("journal: unlock: %w", err)
	}
	return nil
}
