package approval

import "sync"

// hub wakes long polls in this process when a request becomes terminal.
// Replicas that share PostgreSQL also re-read on an interval, so a decision
// recorded elsewhere still ends the wait.
type hub struct {
	mu      sync.Mutex
	waiters map[string][]chan struct{}
}

func newHub() *hub { return &hub{waiters: map[string][]chan struct{}{}} }

// subscribe returns a channel closed on the next notify(id), and a cancel.
func (h *hub) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.waiters[id] = append(h.waiters[id], ch)
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		ws := h.waiters[id]
		for i, w := range ws {
			if w == ch {
				h.waiters[id] = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(h.waiters[id]) == 0 {
			delete(h.waiters, id)
		}
	}
}

func (h *hub) notify(ids ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		for _, ch := range h.waiters[id] {
			close(ch)
		}
		delete(h.waiters, id)
	}
}
