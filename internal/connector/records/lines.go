package records

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped when a source or Prodigy item is a named
// pipe, device, socket or other non-regular file: reading one could block
// forever or never end, so it is refused before any read.
var ErrNotRegular = errors.New("not a regular file")

// lineReader reads lines of any length up to max bytes without a Scanner's
// fixed token limit; a longer line is reported and skipped, not buffered.
type lineReader struct {
	br   *bufio.Reader
	max  int
	buf  []byte
	line int // number of the line last returned, from 1
	eof  bool
}

func newLineReader(br *bufio.Reader, max int) *lineReader {
	return &lineReader{br: br, max: max}
}

// next returns the next line without its newline. The line is valid until
// the next call. tooLong reports a line over the limit, whose bytes are
// dropped. err is io.EOF after the last line.
func (r *lineReader) next() (line []byte, tooLong bool, err error) {
	if r.eof {
		return nil, false, io.EOF
	}
	if cap(r.buf) > 1<<20 {
		r.buf = nil // don't hold on to one huge line's buffer
	}
	r.buf = r.buf[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		n := len(chunk)
		if err == nil {
			n-- // the newline
		}
		if err == nil && len(r.buf) == 0 && !tooLong {
			// The common case: the whole line is in bufio's buffer.
			r.line++
			if n > r.max {
				return nil, true, nil
			}
			return chunk[:n], false, nil
		}
		if !tooLong {
			if len(r.buf)+n > r.max {
				tooLong = true
				r.buf = r.buf[:0]
			} else {
				r.buf = append(r.buf, chunk[:n]...)
			}
		}
		switch err {
		case nil:
			r.line++
			return r.lineOrNil(tooLong), tooLong, nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			r.eof = true
			if len(r.buf) == 0 && !tooLong {
				return nil, false, io.EOF
			}
			r.line++
			return r.lineOrNil(tooLong), tooLong, nil
		default:
			return nil, false, err
		}
	}
}

func (r *lineReader) lineOrNil(tooLong bool) []byte {
	if tooLong {
		return nil
	}
	return r.buf
}

// lineCounter passes reads through to a json.Decoder and remembers where the
// newlines were, so that a decoder offset can be turned into a line number.
// Only newlines past the last offset asked about are kept, so memory stays
// bounded by what the decoder has buffered.
type lineCounter struct {
	r       io.Reader
	base    int64   // where in the file reading started (past a byte order mark)
	off     int64   // offset of the next byte read, from base
	nl      []int64 // offsets of newlines not yet passed
	dropped int     // newlines passed
	err     error   // first read error other than io.EOF
}

func (c *lineCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	for i := 0; i < n; {
		j := bytes.IndexByte(p[i:n], '\n')
		if j < 0 {
			break
		}
		c.nl = append(c.nl, c.off+int64(i+j))
		i += j + 1
	}
	c.off += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// line returns the line (from 1) holding byte offset off. Offsets asked
// about must not decrease.
func (c *lineCounter) line(off int64) int {
	i := 0
	for i < len(c.nl) && c.nl[i] < off {
		i++
	}
	c.dropped += i
	c.nl = c.nl[i:]
	return c.dropped + 1
}

// OpenRegular opens path for reading only if it is a regular file. The open
// itself never blocks: O_NONBLOCK makes opening a FIFO return at once
// (without it, open waits for a writer forever and not even SIGTERM's
// context can stop it), and the descriptor is then checked with fstat, so a
// file swapped for a FIFO or device after an earlier Stat is refused too.
// O_NONBLOCK has no effect on reads of a regular file. flags are added to
// the open (syscall.O_NOFOLLOW).
func OpenRegular(path string, flags int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|flags, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, DescribeMode(fi.Mode()))
	}
	return f, nil
}

func DescribeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "mode " + m.String()
	}
}
