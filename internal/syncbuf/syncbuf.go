// Package syncbuf is a bytes.Buffer that several goroutines may write and
// read at once: a process's output as it runs, a logger's lines read by a
// test while the code under test still logs.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent Write, String and Len. The zero value is empty
// and ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len returns how many bytes were written so far.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}
