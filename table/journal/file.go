package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The permissions of what the journal creates: a journal holds its clients'
// ids (IP addresses, user ids), which are for the owner alone.
const (
	dirPerm  = 0o700
	filePerm = 0o600
)

// restrict removes the group and other permissions of the file or
// directory at path, if it has any (made by hand, or by an older version).
// A file of another owner, which this process cannot change (EPERM), is
// left as it is.
func restrict(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(path, perm&^0o077); err != nil && !errors.Is(err, fs.ErrPermission) {
			return err
		}
	}
	return nil
}

// writeZeros fills f with size zero bytes, the fallback of allocate.
func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; {
		n, err := f.WriteAt(buf[:min(int64(len(buf)), size-off)], off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// syncDir fsyncs a directory, making renames, creations and removals in it
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// brokenPath returns a path for evidence about the file name in dir that does
// not exist yet: name.broken, else name.broken.1, name.broken.2, ...
func brokenPath(dir, name string) (string, error) {
	for i := 0; i < 1000; i++ {
		p := filepath.Join(dir, name+brokenSuffix)
		if i > 0 {
			p = fmt.Sprintf("%s.%d", p, i)
		}
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return p, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("journal: too many %s%s.N files in %s", name, brokenSuffix, dir)
}

// copyAside writes data to a new evidence file for name, and fsyncs it if
// durable.
func copyAside(dir, name string, data []byte, durable bool) (string, error) {
	p, err := brokenPath(dir, name)
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(p)
		return "", err
	}
	return p, nil
}

// moveAside renames the file name in dir to a new evidence name.
func moveAside(dir, name string) (string, error) {
	p, err := brokenPath(dir, name)
	if err != nil {
		return "", err
	}
	return p, os.Rename(filepath.Join(dir, name), p)
}

// WriteFileAtomic makes dir/name hold data, durably and all at once: it
// writes a temporary file, fsyncs it, renames it into place and fsyncs the
// directory, so a crash leaves the old content or the new, never a mix. A
// data directory's small descriptions (the shard count) are written so. The
// file is readable by its owner only (0600).
func WriteFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, filePerm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("journal: write %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}
