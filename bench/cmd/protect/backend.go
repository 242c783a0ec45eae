package main

import (
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"
)

// fault is what the backend injects into its faulty route.
type fault struct {
	errorRate float64       // share of calls answered 500 at once
	hangRate  float64       // share of calls that hang for hang (the caller's timeout is shorter)
	hang      time.Duration // how long a hanging call takes
}

// backend is the dependency: /healthy and /faulty each take serviceTime; fault injection applies to
// /faulty only and can be switched at any time.
type backend struct {
	serviceTime time.Duration
	fault       atomic.Pointer[fault]
	phase       atomic.Int32                // current phase, -1 during warm-up
	hits        [numPhases + 1]atomic.Int64 // calls to /faulty by phase+1 (0: warm-up)
}

func (b *backend) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthy", func(w http.ResponseWriter, r *http.Request) {
		b.serve(w, r, nil)
	})
	mux.HandleFunc("/faulty", func(w http.ResponseWriter, r *http.Request) {
		b.hits[b.phase.Load()+1].Add(1)
		b.serve(w, r, b.fault.Load())
	})
	return mux
}

func (b *backend) serve(w http.ResponseWriter, r *http.Request, f *fault) {
	if f != nil {
		switch p := rand.Float64(); {
		case p < f.errorRate:
			http.Error(w, "injected failure", http.StatusInternalServerError)
			return
		case p < f.errorRate+f.hangRate:
			if !sleepCtx(r, f.hang) {
				return
			}
		}
	}
	if !sleepCtx(r, b.serviceTime) {
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// sleepCtx waits d unless the client goes away first; it reports whether d elapsed.
func sleepCtx(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}
