package imageverify

import (
	"container/list"
	"sync"
)

// cacheKey is a verified manifest (repository@digest: signatures live per
// repository) under one policy.
type cacheKey struct{ digest, policy string }

// lru remembers the last size verified keys; safe for concurrent reconciles.
type lru struct {
	mu    sync.Mutex
	size  int
	order *list.List // front: most recent; values are cacheKey
	items map[cacheKey]*list.Element
	found map[cacheKey]Format
}

func newLRU(size int) *lru {
	return &lru{size: size, order: list.New(), items: map[cacheKey]*list.Element{}, found: map[cacheKey]Format{}}
}

func (l *lru) get(k cacheKey) (Format, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.items[k]
	if !ok {
		return "", false
	}
	l.order.MoveToFront(e)
	return l.found[k], true
}

func (l *lru) add(k cacheKey, f Format) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.items[k]; ok {
		l.order.MoveToFront(e)
		l.found[k] = f
		return
	}
	l.items[k] = l.order.PushFront(k)
	l.found[k] = f
	for l.order.Len() > l.size {
		oldest := l.order.Back()
		l.order.Remove(oldest)
		delete(l.items, oldest.Value.(cacheKey))
		delete(l.found, oldest.Value.(cacheKey))
	}
}
