package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// The large service of -commands N: N-6 commands besides the six stories,
// in groups of up to twelve, so that the page shows what a service with
// hundreds of commands looks like. Most are healthy; the others fail now
// and then, run past their timeout, have outages that come and go (each at
// its own time, so some breaker is always open somewhere), are refused by
// a rate limiter, get bad requests, or are declared and never called.

const (
	storyCommands  = 6    // the stories of the package comment
	maxCommands    = 2000 // -commands at most
	groupSize      = 12   // generated commands per group
	outagePeriod   = 4 * time.Minute
	outageDuration = 40 * time.Second
)

var (
	groupNames = []string{"catalog", "orders", "shipping", "pricing", "auth", "notifications", "media",
		"reviews", "cart", "ledger", "fraud", "geo", "profile", "sessions", "billing", "tax", "currency",
		"loyalty", "coupons", "wishlist", "ads", "chat", "email", "sms", "storage", "thumbnails",
		"translations", "audit", "exports", "imports"}
	verbs = []string{"Get", "List", "Create", "Update", "Delete", "Search", "Sync", "Validate", "Count",
		"Lookup", "Refresh", "Reserve"} // groupSize of them: names are unique in a group
	nouns = []string{"Item", "Batch", "Summary", "Status", "Details", "Index", "Quote", "Token", "Events",
		"Record", "Preview", "Report"}
)

// behaviour is what a generated command's dependency does.
type behaviour int

const (
	healthy  behaviour = iota // 5-40 ms, 0.5 % errors
	flaky                     // 8 % errors
	slow                      // one call in five runs past the 300 ms timeout
	outage                    // down outageDuration of every outagePeriod; a static fallback answers
	idle                      // declared, never called
	limited                   // a token bucket at half its load refuses the rest
	badInput                  // 3 % of its calls are bad requests
)

// mix is the behaviour of the i-th generated command: mix[i%len(mix)].
var mix = []behaviour{healthy, healthy, flaky, healthy, slow, outage, healthy, idle, limited, healthy, badInput, outage}

// generated is a generated command. It is idempotent, so that the groups
// with retries retry it.
type generated struct {
	name  string
	b     behaviour
	start time.Time
	phase time.Duration // of its outages
}

func (c generated) Name() string   { return c.name }
func (generated) Idempotent() bool { return true }

func (c generated) Run(ctx context.Context) (int, error) {
	d, fail := between(5*time.Millisecond, 40*time.Millisecond), rand.Float64() < 0.005
	var err error = errUnavailable
	switch c.b {
	case flaky:
		fail = rand.Float64() < 0.08
	case slow:
		if rand.Float64() < 0.2 {
			d = between(250*time.Millisecond, 600*time.Millisecond)
		}
	case outage:
		if (time.Since(c.start)+c.phase)%outagePeriod < outageDuration {
			d, fail = between(1*time.Millisecond, 5*time.Millisecond), true
		}
	case badInput:
		if rand.Float64() < 0.03 {
			fail, err = true, command.BadRequest(errors.New("invalid sku"))
		}
	}
	if err := sleep(ctx, d); err != nil {
		return 0, err
	}
	if fail {
		return 0, err
	}
	return 1, nil
}

// withFallback is a generated command with a static fallback (-1).
type withFallback struct {
	generated
	fallback.Static[int]
}

// generatedLoad is one generated command and its calls per second.
type generatedLoad struct {
	group *command.Group
	call  command.Runner[int]
	rate  float64
}

// addGenerated creates the groups of n generated commands in reg. A group
// of three is a semaphore group, the others pools; one in four retries.
func addGenerated(reg *command.Registry, n int, start time.Time) ([]generatedLoad, error) {
	breaker := circuit.Config{OpenDuration: 5 * time.Second, OpenBackoff: 2, OpenMaxDuration: 20 * time.Second}
	var loads []generatedLoad
	for j := 0; j*groupSize < n; j++ {
		name := groupNames[j%len(groupNames)]
		if j >= len(groupNames) {
			name = fmt.Sprintf("%s-%d", name, j/len(groupNames)+1)
		}
		cfg := command.GroupConfig{MaxConcurrent: 16, Timeout: 300 * time.Millisecond, CommandBreaker: breaker,
			Commands: map[string]command.CommandConfig{}}
		if j%3 == 2 {
			cfg.Strategy = command.Semaphore
		}
		if j%4 == 1 {
			cfg.Retry = retry.Config{MaxAttempts: 2}
		}
		var cmds []generatedLoad
		for k := 0; k < groupSize && j*groupSize+k < n; k++ {
			i := j*groupSize + k
			c := generated{name: verbs[k] + nouns[(j+k)%len(nouns)], b: mix[i%len(mix)], start: start,
				phase: time.Duration(i) * 17 * time.Second % outagePeriod}
			rate := float64(1 + i%5)
			var call command.Runner[int] = c
			switch c.b {
			case idle:
				cfg.Commands[c.name] = command.CommandConfig{}
				continue
			case limited:
				bucket, err := ratelimit.NewTokenBucket(ratelimit.TokenBucketConfig{Rate: rate / 2, Burst: 2})
				if err != nil {
					return nil, err
				}
				cfg.Commands[c.name] = command.CommandConfig{RateLimit: bucket}
			case outage:
				call = withFallback{generated: c, Static: fallback.Static[int]{Value: -1}}
			}
			cmds = append(cmds, generatedLoad{call: call, rate: rate})
		}
		g, err := reg.NewGroup(name, cfg)
		if err != nil {
			return nil, err
		}
		for _, l := range cmds {
			l.group = g
			loads = append(loads, l)
		}
	}
	return loads, nil
}
