// Command drill runs a scripted fault-injection drill against a live
// service and prints its report: when each breaker opened and closed, how
// many calls reached the faulty dependency, how many fallbacks were
// served, how long recovery took after the fault was removed, and the
// healthy route's p99 against its warm baseline. docs/drills.md explains
// every figure.
//
// Everything runs in this process on loopback (127.0.0.1) and stops by
// itself: a backend with two routes, /catalog and /inventory; a front
// service whose /catalog and /inventory endpoints call them through a
// bulwark group each (a pool of 10, a 250 ms timeout, breakers, a static
// fallback), over one shared HTTP client whose pool holds 20 connections;
// and an open-loop load generator. The fault is injected with faultinject
// into the inventory client's transport, below the protection, as a
// staging drill would. The script: warm (the baseline), inject, hold,
// remove, observe.
//
//	go run ./examples/drill                       # the "errors" drill: about 11 s
//	go run ./examples/drill -fault errors,dns,pool # three drills, one report each
//	go run ./examples/drill -json                 # one JSON object per drill, for the archive
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	p := defaultParams()
	faults := flag.String("fault", "errors", "comma-separated drills to run, in turn: "+strings.Join(presetNames(), ", "))
	flag.DurationVar(&p.Warm, "warm", p.Warm, "healthy load before the injection (the baseline)")
	flag.DurationVar(&p.Hold, "hold", p.Hold, "how long the fault stays injected")
	flag.DurationVar(&p.Observe, "observe", p.Observe, "load after the removal, to see the recovery")
	flag.IntVar(&p.Rate, "rate", p.Rate, "requests per second per route")
	flag.BoolVar(&p.JSON, "json", p.JSON, "print each report as one line of JSON instead of text")
	flag.Parse()
	p.Faults = strings.Split(*faults, ",")
	if err := run(os.Stdout, p); err != nil {
		fmt.Fprintln(os.Stderr, "drill:", err)
		os.Exit(1)
	}
}

// params is a drill's script and load.
type params struct {
	Faults  []string      // the presets to drill, one drill each
	Warm    time.Duration // load before the injection
	Hold    time.Duration // the fault's duration
	Observe time.Duration // load after the removal
	Rate    int           // requests per second per route
	JSON    bool          // print JSON lines instead of text
}

func defaultParams() params {
	return params{Faults: []string{"errors"}, Warm: 2 * time.Second, Hold: 5 * time.Second, Observe: 4 * time.Second, Rate: 100}
}

// errUsage is wrapped by the errors of bad flags.
var errUsage = errors.New("usage")

func (p params) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
	}
	for _, name := range p.Faults {
		if _, ok := presets[name]; !ok {
			return bad("-fault %q is not a drill, want one of %s", name, strings.Join(presetNames(), ", "))
		}
	}
	switch {
	case len(p.Faults) == 0:
		return bad("-fault names no drill")
	case p.Warm <= 0:
		return bad("-warm %v must be positive", p.Warm)
	case p.Hold <= 0:
		return bad("-hold %v must be positive", p.Hold)
	case p.Observe <= 0:
		return bad("-observe %v must be positive", p.Observe)
	case p.Rate <= 0 || p.Rate > 1000:
		return bad("-rate %d must be in 1..1000", p.Rate)
	}
	return nil
}

// run runs the drills of p in turn and writes their reports to w.
func run(w io.Writer, p params) error {
	if err := p.validate(); err != nil {
		return err
	}
	for i, name := range p.Faults {
		r, err := drill(name, p)
		if err != nil {
			return fmt.Errorf("drill %s: %w", name, err)
		}
		if p.JSON {
			if err := json.NewEncoder(w).Encode(r); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		r.write(w)
	}
	return nil
}
